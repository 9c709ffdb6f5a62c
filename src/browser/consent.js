// Runs DuckDuckGo's autoconsent in this document and keeps what it reports in
// window.__wpConsent, which webpilot reads: which consent dialog was found, and what was done.
// `AutoConsent`, `config` and `rules` are given by the caller. Rule steps that must run in the
// page ("eval" steps) run here, in the page's own world, where this script already is.
(AutoConsent, config, rules) => {
  if (window.__wpConsent) return window.__wpConsent.state;
  const state = { lifecycle: 'loading', attempts: 0, detected: [], popup: null, result: null, done: null, version: 0 };
  let instance = null;
  // webpilot waits for the next change rather than polling: `next(seen, ms)` resolves with the
  // state at once when it changed since version `seen`, else on the next change or after `ms`.
  const waiting = [];
  const changed = () => { state.version += 1; waiting.splice(0).forEach((wake) => wake()); };
  const next = (seen, ms) => state.version !== seen ? Promise.resolve(state)
    : new Promise((wake) => { waiting.push(wake); setTimeout(wake, ms); }).then(() => state);
  const evaluate = (code) => {
    try { return (0, eval)(code); } catch (_) { return false; }
  };
  const send = (message) => {
    if (!message || typeof message !== 'object') return;
    switch (message.type) {
      case 'report':
        state.lifecycle = message.state.lifecycle;
        state.attempts = message.state.findCmpAttempts;
        state.detected = message.state.detectedCmps || [];
        break;
      case 'popupFound': state.popup = message.cmp; break;
      case 'optOutResult':
      case 'optInResult':
        state.result = { cmp: message.cmp, ok: !!message.result, out: message.type === 'optOutResult' };
        break;
      case 'autoconsentDone': state.done = { cmp: message.cmp, cosmetic: !!message.isCosmetic }; break;
      case 'eval':
        Promise.resolve(evaluate(message.code))
          .then((value) => !!value, () => false)
          .then((result) => instance && instance.receiveMessageCallback({ type: 'evalResp', id: message.id, result }));
        return;
    }
    changed();
  };
  window.__wpConsent = { state, next };
  instance = new AutoConsent(send, config, { autoconsent: rules });
  // autoconsent tries generic patterns on every second look only; with one look (no retries),
  // that look is made its second. The count is read when the look starts, after this returns.
  if (config.heuristicMode !== 'off' && instance.state) instance.state.findCmpAttempts = 1;
  return state;
}
