// webpilot's in-page agent, installed in every document before the page's own scripts run.
// It owns two things the browser layer cannot see over CDP cheaply:
//  1. busy-ness: pending short timers, fetch/XHR calls, animation frames, last DOM mutation;
//  2. element refs: a number per interactive element, never reused within this document.
(() => {
  if (window.__wp) return;
  const SHORT_TIMER_MS = 1000; // timers longer than this are not "about to render"
  const LOOP_DEPTH = 3; // a timer/frame re-armed from its own callback this deep is a loop, not work
  const now = () => performance.now();
  const origSetTimeout = window.setTimeout;
  const origClearTimeout = window.clearTimeout;
  const origRaf = window.requestAnimationFrame;
  const origCancelRaf = window.cancelAnimationFrame;
  const origFetch = window.fetch;
  const timers = new Set();
  const frames = new Set();
  let chainDepth = 0;
  let requests = 0;
  let lastMutation = now();
  const clickables = new WeakSet();

  // Work that just finished may still schedule more (promise chains): quiet counts from the
  // last finished piece of work as well as from the last DOM change.
  let lastActivity = now();
  const settleLater = (fn) => origSetTimeout.call(window, () => { lastActivity = now(); fn(); }, 0);
  const tracked = (set, id, depth, fn) => function (...args) {
    set.delete(id.value);
    lastActivity = now();
    const outer = chainDepth;
    chainDepth = depth + 1;
    try { return fn.apply(this, args); } finally { chainDepth = outer; }
  };

  window.setTimeout = function (fn, delay, ...rest) {
    const ms = Number(delay) || 0;
    if (typeof fn !== 'function' || ms > SHORT_TIMER_MS || chainDepth >= LOOP_DEPTH) {
      return origSetTimeout.call(this, fn, delay, ...rest);
    }
    const id = { value: 0 };
    id.value = origSetTimeout.call(this, tracked(timers, id, chainDepth, fn), delay, ...rest);
    timers.add(id.value);
    return id.value;
  };
  window.clearTimeout = function (id) { timers.delete(id); return origClearTimeout.call(this, id); };
  if (origRaf) {
    window.requestAnimationFrame = function (fn) {
      if (typeof fn !== 'function' || chainDepth >= LOOP_DEPTH) return origRaf.call(this, fn);
      const id = { value: 0 };
      id.value = origRaf.call(this, tracked(frames, id, chainDepth, fn));
      frames.add(id.value);
      return id.value;
    };
    window.cancelAnimationFrame = function (id) { frames.delete(id); return origCancelRaf.call(this, id); };
  }
  if (origFetch) {
    window.fetch = function (...args) {
      requests++;
      let promise;
      try { promise = origFetch.apply(this, args); } catch (e) { requests--; throw e; }
      promise.then(() => settleLater(() => requests--), () => settleLater(() => requests--));
      return promise;
    };
  }
  // Reading a response body is part of the request: count it until the body is there.
  if (window.Response) {
    for (const method of ['text', 'json', 'arrayBuffer', 'blob', 'formData']) {
      const orig = Response.prototype[method];
      if (typeof orig !== 'function') continue;
      Response.prototype[method] = function (...args) {
        requests++;
        let promise;
        try { promise = orig.apply(this, args); } catch (e) { requests--; throw e; }
        promise.then(() => settleLater(() => requests--), () => settleLater(() => requests--));
        return promise;
      };
    }
  }
  const origSend = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...args) {
    requests++;
    this.addEventListener('loadend', () => settleLater(() => requests--), { once: true });
    try { return origSend.apply(this, args); } catch (e) { requests--; throw e; }
  };
  const CLICK_EVENTS = new Set(['click', 'mousedown', 'mouseup', 'pointerdown', 'pointerup']);
  const origAdd = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, ...rest) {
    if (CLICK_EVENTS.has(type) && this instanceof Element) clickables.add(this);
    return origAdd.call(this, type, ...rest);
  };
  // A navigation away starts here, before CDP reports any loading: remember when.
  let leavingAt = null;
  origAdd.call(window, 'beforeunload', () => { leavingAt = now(); }, true);
  // Submitting a form only plans its navigation: a task started later runs it (and only then
  // `beforeunload`), and a busy renderer may answer probes first. From the submit on, the page
  // counts as leaving, unless a handler cancelled the submit or it navigates elsewhere.
  const leavesThisFrame = (form, submitter) => {
    const attr = (own, name) => ((submitter && submitter.getAttribute(own)) || form.getAttribute(name) || '').toLowerCase();
    const target = attr('formtarget', 'target');
    const sameFrame = target === '' || target === '_self' || (window === window.top && (target === '_top' || target === '_parent'));
    return sameFrame && attr('formmethod', 'method') !== 'dialog';
  };
  let lastSubmit = null;
  origAdd.call(window, 'submit', (event) => { lastSubmit = { event, at: now() }; }, true);
  const origFormSubmit = HTMLFormElement.prototype.submit;
  HTMLFormElement.prototype.submit = function (...args) {
    if (leavesThisFrame(this, null)) leavingAt = now();
    return origFormSubmit.apply(this, args);
  };
  // Read after dispatch, when `defaultPrevented` is final.
  const submittedAt = () => {
    if (!lastSubmit) return null;
    const { event, at } = lastSubmit;
    return !event.defaultPrevented && event.target instanceof HTMLFormElement
      && leavesThisFrame(event.target, event.submitter) ? at : null;
  };
  new MutationObserver((records) => {
    if (records.some((r) => r.type !== 'attributes' || r.attributeName !== 'style')) lastMutation = now();
  }).observe(document, { childList: true, subtree: true, characterData: true, attributes: true });

  // ---- refs -------------------------------------------------------------------------------
  const docId = Math.random().toString(36).slice(2, 10);
  const refOf = new WeakMap();
  const byRef = new Map();
  let firstRef = null;
  let nextRef = null;

  const NATIVE = { A: 'link', BUTTON: 'button', SELECT: 'combobox', TEXTAREA: 'textbox', SUMMARY: 'button' };
  const INPUT_ROLES = {
    button: 'button', submit: 'button', reset: 'button', image: 'button', checkbox: 'checkbox',
    radio: 'radio', range: 'slider', number: 'spinbutton', search: 'searchbox', file: 'button',
    color: 'button',
  };
  const ARIA_ROLES = new Set(['button', 'link', 'checkbox', 'radio', 'switch', 'tab', 'menuitem',
    'menuitemcheckbox', 'menuitemradio', 'option', 'textbox', 'searchbox', 'combobox', 'slider',
    'spinbutton', 'listbox', 'treeitem', 'gridcell']);

  const squash = (s, max) => {
    const t = (s || '').replace(/\s+/g, ' ').trim();
    return t.length > max ? t.slice(0, max - 1) + '…' : t;
  };
  function roleOf(el) {
    const explicit = (el.getAttribute('role') || '').split(' ')[0];
    if (ARIA_ROLES.has(explicit)) return explicit;
    if (el.tagName === 'A') return el.hasAttribute('href') ? 'link' : null;
    if (el.tagName === 'INPUT') {
      const type = (el.getAttribute('type') || 'text').toLowerCase();
      if (type === 'hidden') return null;
      return INPUT_ROLES[type] || 'textbox';
    }
    if (el.tagName === 'SELECT') return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
    if (NATIVE[el.tagName]) return NATIVE[el.tagName];
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) return 'textbox';
    return null;
  }
  function weakInteractive(el) {
    if (el === document.body || el === document.documentElement) return false;
    if (clickables.has(el) || el.hasAttribute('onclick')) return true;
    const tabindex = el.getAttribute('tabindex');
    return tabindex !== null && Number(tabindex) >= 0;
  }
  function labelText(el) {
    const byIds = el.getAttribute('aria-labelledby');
    if (byIds) {
      const root = el.getRootNode();
      const text = byIds.split(/\s+/).map((id) => root.getElementById && root.getElementById(id))
        .filter(Boolean).map((n) => n.innerText || n.textContent).join(' ');
      if (text.trim()) return text;
    }
    if (el.labels && el.labels.length) {
      const label = el.labels[0];
      const clone = label.cloneNode(true);
      clone.querySelectorAll('input,select,textarea').forEach((n) => n.remove());
      if (clone.textContent.trim()) return clone.textContent;
    }
    return '';
  }
  function nameOf(el, role) {
    const aria = el.getAttribute('aria-label');
    if (aria && aria.trim()) return aria;
    const label = labelText(el);
    if (label) return label;
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') {
      const type = (el.type || '').toLowerCase();
      if (['button', 'submit', 'reset'].includes(type)) return el.value || type;
      return el.placeholder || el.title || el.name || '';
    }
    const text = el.innerText;
    if (text && text.trim()) return text;
    const img = el.querySelector && el.querySelector('img[alt],svg[aria-label]');
    if (img) return img.getAttribute('alt') || img.getAttribute('aria-label');
    return el.title || (role === 'link' ? el.getAttribute('href') : '') || '';
  }
  function shortHref(el) {
    const raw = el.getAttribute('href') || '';
    let out = raw;
    try {
      const u = new URL(el.href, document.baseURI);
      out = u.origin === location.origin ? u.pathname + u.search + u.hash : u.href;
      if (raw.startsWith('#')) out = raw;
    } catch (e) { /* keep raw */ }
    return squash(out, 80);
  }
  function describe(el, role) {
    const item = { role, name: squash(nameOf(el, role), 80) };
    const tag = el.tagName;
    if (role === 'link') item.href = shortHref(el);
    if (tag === 'SELECT') {
      const chosen = Array.from(el.selectedOptions || []).map((o) => squash(o.label || o.text, 40));
      item.value = chosen.join(', ');
      item.options = el.options.length;
    } else if ((tag === 'INPUT' || tag === 'TEXTAREA') && !['checkbox', 'radio', 'button', 'submit', 'reset', 'image'].includes(el.type)) {
      item.value = el.type === 'password' ? (el.value ? '••••' : '') : squash(el.value, 60);
      if (el.type && !['text', 'search', 'textarea'].includes(el.type)) item.type = el.type;
    } else if (el.isContentEditable) {
      item.value = squash(el.innerText, 60);
    }
    if (role === 'checkbox' || role === 'radio' || role === 'switch') {
      item.checked = el.checked === true || el.getAttribute('aria-checked') === 'true';
    }
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') item.disabled = true;
    if (el.getAttribute('aria-expanded')) item.expanded = el.getAttribute('aria-expanded') === 'true';
    return item;
  }
  function refFor(el) {
    let ref = refOf.get(el);
    if (ref === undefined) {
      ref = nextRef++;
      refOf.set(el, ref);
    }
    byRef.set(ref, new WeakRef(el));
    return ref;
  }
  function visibleBox(el, offset) {
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) return null;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.visibility === 'collapse' || Number(style.opacity) === 0) return null;
    return { x: r.left + offset.x, y: r.top + offset.y, w: r.width, h: r.height };
  }
  function frameOffset(frameEl, offset) {
    const r = frameEl.getBoundingClientRect();
    const s = getComputedStyle(frameEl);
    return {
      x: offset.x + r.left + parseFloat(s.borderLeftWidth) + parseFloat(s.paddingLeft),
      y: offset.y + r.top + parseFloat(s.borderTopWidth) + parseFloat(s.paddingTop),
    };
  }

  // Walks the light DOM, open shadow roots and same-origin iframes in document order.
  function collect(root, offset, view, out) {
    const visit = (node, insideNative) => {
      for (let child = node.firstElementChild; child; child = child.nextElementSibling) {
        walk(child, insideNative);
      }
    };
    const walk = (el, insideNative) => {
      if (el.tagName === 'SCRIPT' || el.tagName === 'STYLE' || el.tagName === 'TEMPLATE') return;
      const style = el.checkVisibility ? el.checkVisibility({ visibilityProperty: false }) : true;
      if (!style) return;
      const role = roleOf(el);
      const weak = !role && !insideNative && weakInteractive(el);
      let entry = null;
      if (role || weak) {
        const box = visibleBox(el, offset);
        if (box) {
          entry = { el, role: role || 'clickable', weak, box, view };
          out.push(entry);
        }
      }
      const before = out.length;
      if (el.shadowRoot) visit(el.shadowRoot, insideNative || !!role);
      if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
        let doc = null;
        try { doc = el.contentDocument; } catch (e) { doc = null; }
        if (doc && doc.documentElement) {
          const inner = frameOffset(el, offset);
          const innerView = { x: inner.x, y: inner.y, w: el.clientWidth, h: el.clientHeight, parent: view };
          collect(doc.documentElement, inner, innerView, out);
        }
      } else {
        visit(el, insideNative || (!!role && role !== 'listbox'));
      }
      // A container whose listener serves the controls inside it is not itself a control.
      if (entry && entry.weak && out.length > before) out.splice(out.indexOf(entry), 1);
    };
    walk(root, false);
  }
  function inView(box, view) {
    for (let v = view; v; v = v.parent) {
      if (box.x + box.w <= v.x || box.y + box.h <= v.y || box.x >= v.x + v.w || box.y >= v.y + v.h) return false;
    }
    return true;
  }

  function snapshot(startRef, selector) {
    if (firstRef === null) { firstRef = startRef; nextRef = startRef; }
    if (nextRef < startRef) nextRef = startRef;
    let root = document.documentElement;
    if (selector) {
      root = document.querySelector(selector);
      if (!root) return { error: 'selector', doc: docId, first: firstRef, next: nextRef };
    }
    const top = { x: 0, y: 0, w: window.innerWidth, h: window.innerHeight, parent: null };
    const found = [];
    if (root) collect(root, { x: 0, y: 0 }, top, found);
    const items = found.map((f) => {
      const item = describe(f.el, f.role);
      item.ref = refFor(f.el);
      item.box = [f.box.x, f.box.y, f.box.w, f.box.h].map(Math.round);
      if (!inView(f.box, f.view)) item.offscreen = true;
      return item;
    });
    const de = document.documentElement; // null while a new document is being created
    return { doc: docId, first: firstRef, next: nextRef, items,
      scroll: [Math.round(window.scrollX), Math.round(window.scrollY),
        de ? de.scrollWidth : 0, de ? de.scrollHeight : 0] };
  }

  // Resolves a ref of this document to its element, or says why it cannot.
  function resolve(ref) {
    if (firstRef === null || ref < firstRef) return { status: 'stale', why: 'the page has loaded a new document since' };
    if (ref >= nextRef) return { status: 'unknown' };
    const weak = byRef.get(ref);
    const el = weak && weak.deref();
    if (!el || !el.isConnected) return { status: 'stale', why: 'the element was removed from the page' };
    return { status: 'ok', el };
  }

  function textMatches(query) {
    if (!query) return false;
    try { if (document.querySelector(query)) return true; } catch (e) { /* not a selector */ }
    return !!(document.body && document.body.innerText.includes(query));
  }

  function state(waitFor) {
    const submitted = submittedAt();
    const leaving = submitted === null ? leavingAt : Math.max(submitted, leavingAt ?? submitted);
    return {
      doc: docId,
      readyState: document.readyState,
      timers: timers.size,
      frames: frames.size,
      requests,
      quietMs: Math.round(now() - Math.max(lastMutation, lastActivity)),
      leavingMs: leaving === null ? null : Math.round(now() - leaving),
      found: waitFor ? textMatches(waitFor) : null,
    };
  }

  // Text matches of `query` with their surroundings and the refs of the nearest elements.
  function find(query, limit) {
    const needle = query.toLowerCase();
    const hits = [];
    const walker = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_TEXT);
    const refd = Array.from(byRef.values()).map((w) => w.deref()).filter((e) => e && e.isConnected);
    for (let node = walker.nextNode(); node && hits.length < limit; node = walker.nextNode()) {
      const at = node.data.toLowerCase().indexOf(needle);
      if (at < 0) continue;
      const host = node.parentElement;
      if (!host || !host.checkVisibility || !host.checkVisibility()) continue;
      const block = host.closest('p,li,td,th,h1,h2,h3,h4,h5,h6,section,article,div,label,button,a') || host;
      const text = (block.innerText || node.data).replace(/\s+/g, ' ');
      const pos = Math.max(0, text.toLowerCase().indexOf(needle));
      const context = (pos > 80 ? '…' : '') + text.slice(Math.max(0, pos - 80), pos + needle.length + 80) +
        (pos + needle.length + 80 < text.length ? '…' : '');
      hits.push({ context, refs: nearestRefs(host, refd) });
    }
    return hits;
  }
  function nearestRefs(host, refd) {
    const inside = refd.filter((e) => e.contains(host) || host.contains(e));
    if (inside.length) return inside.slice(0, 3).map((e) => refOf.get(e));
    let before = null;
    let after = null;
    for (const e of refd) {
      const rel = host.compareDocumentPosition(e);
      if (rel & Node.DOCUMENT_POSITION_PRECEDING) {
        if (!before || before.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_FOLLOWING) before = e;
      } else if (rel & Node.DOCUMENT_POSITION_FOLLOWING) {
        if (!after || after.compareDocumentPosition(e) & Node.DOCUMENT_POSITION_PRECEDING) after = e;
      }
    }
    return [before, after].filter(Boolean).map((e) => refOf.get(e));
  }

  Object.defineProperty(window, '__wp', {
    value: Object.freeze({ snapshot, resolve, state, find, docId }),
    enumerable: false,
  });
})();
