// webpilot's in-page agent, installed in every document before the page's own scripts run.
// It owns what the browser layer cannot see over CDP cheaply:
//  1. busy-ness: pending short timers, fetch/XHR calls, animation frames, messages the page
//     sends itself, last DOM mutation — each with its start, so an action waits for its own;
//  2. element refs: a number per interactive element, never reused within this document;
//  3. the rendered tree for reading: shadow roots (closed ones too, caught as they are
//     attached) and same-origin frames in place, foreign frames as marks the tab fills in;
//  4. pointing: where a real pointer event reaches an element, through frames.
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
  // Pending work, each with the time it started, so that after an action only what the action
  // started is waited for.
  const timers = new Map();
  const frames = new Map();
  const requests = new Map();
  let nextRequest = 0;
  let chainDepth = 0;
  let lastMutation = now();
  const clickables = new WeakSet();

  // Work that just finished may still schedule more (promise chains): quiet counts from the
  // last finished piece of work as well as from the last DOM change.
  let lastActivity = now();
  // webpilot's readiness wait sleeps in `changed(ms)` and is woken by the next DOM change or
  // finished piece of work, so it sees the render that satisfies it at once, not a poll later.
  const wakers = [];
  const wake = () => { if (wakers.length) wakers.splice(0).forEach((resolve) => resolve(true)); };
  const changed = (ms) => new Promise((resolve) => {
    wakers.push(resolve);
    origSetTimeout.call(window, () => resolve(false), ms);
  });
  const settleLater = (fn) => origSetTimeout.call(window, () => { lastActivity = now(); fn(); wake(); }, 0);
  const tracked = (pending, id, depth, fn) => function (...args) {
    pending.delete(id.value);
    lastActivity = now();
    const outer = chainDepth;
    chainDepth = depth + 1;
    try { return fn.apply(this, args); } finally { chainDepth = outer; wake(); }
  };
  // Runs `start` counted as one request until the promise it returns settles.
  const asRequest = (start) => {
    const token = ++nextRequest;
    requests.set(token, now());
    let promise;
    try { promise = start(); } catch (e) { requests.delete(token); throw e; }
    const done = () => settleLater(() => requests.delete(token));
    promise.then(done, done);
    return promise;
  };

  window.setTimeout = function (fn, delay, ...rest) {
    const ms = Number(delay) || 0;
    if (typeof fn !== 'function' || ms > SHORT_TIMER_MS || chainDepth >= LOOP_DEPTH) {
      return origSetTimeout.call(this, fn, delay, ...rest);
    }
    const id = { value: 0 };
    id.value = origSetTimeout.call(this, tracked(timers, id, chainDepth, fn), delay, ...rest);
    timers.set(id.value, now());
    return id.value;
  };
  window.clearTimeout = function (id) { timers.delete(id); return origClearTimeout.call(this, id); };
  if (origRaf) {
    window.requestAnimationFrame = function (fn) {
      if (typeof fn !== 'function' || chainDepth >= LOOP_DEPTH) return origRaf.call(this, fn);
      const id = { value: 0 };
      id.value = origRaf.call(this, tracked(frames, id, chainDepth, fn));
      frames.set(id.value, now());
      return id.value;
    };
    window.cancelAnimationFrame = function (id) { frames.delete(id); return origCancelRaf.call(this, id); };
  }
  // A fetch counts until its response headers are there; the body only while someone reads it.
  if (origFetch) {
    window.fetch = function (...args) { return asRequest(() => origFetch.apply(this, args)); };
  }
  if (window.Response) {
    for (const method of ['text', 'json', 'arrayBuffer', 'blob', 'formData']) {
      const orig = Response.prototype[method];
      if (typeof orig !== 'function') continue;
      Response.prototype[method] = function (...args) { return asRequest(() => orig.apply(this, args)); };
    }
  }
  const origSend = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...args) {
    const token = ++nextRequest;
    requests.set(token, now());
    this.addEventListener('loadend', () => settleLater(() => requests.delete(token)), { once: true });
    try { return origSend.apply(this, args); } catch (e) { requests.delete(token); throw e; }
  };
  // Shadow roots as they are attached, closed ones included: what they show is on the screen.
  const shadows = new WeakMap();
  const attachedRoots = new Set();
  const origAttachShadow = Element.prototype.attachShadow;
  let closedRoots = 0;
  Element.prototype.attachShadow = function (...args) {
    const root = origAttachShadow.apply(this, args);
    if (root.mode === 'closed') { shadows.set(this, root); closedRoots++; }
    attachedRoots.add(new WeakRef(root));
    return root;
  };
  const shadowOf = (el) => el.shadowRoot || (closedRoots > 0 && shadows.get(el)) || null;
  const CLICK_EVENTS = new Set(['click', 'mousedown', 'mouseup', 'pointerdown', 'pointerup']);
  const origAdd = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, ...rest) {
    if (CLICK_EVENTS.has(type) && this instanceof Element) clickables.add(this);
    return origAdd.call(this, type, ...rest);
  };
  // Messages a document sends itself schedule work as timers do (React's scheduler runs on a
  // MessageChannel, setImmediate polyfills on window.postMessage): each counts until it is
  // delivered, or for MESSAGE_TTL_MS at most (a port may have been handed to a worker).
  const MESSAGE_TTL_MS = 200;
  const MESSAGES_KEPT = 100;
  const messages = new Map();
  let nextMessage = 0;
  // Messages that arrive as 'message' events on `receiver` (those `ours` accepts), oldest
  // first; returns what the sending side calls per message.
  const trackMessages = (receiver, ours) => {
    const queue = [];
    origAdd.call(receiver, 'message', (event) => {
      if (!ours(event) || !queue.length) return;
      messages.delete(queue.shift());
      lastActivity = now();
      wake();
    });
    return () => {
      const id = ++nextMessage;
      messages.set(id, now());
      // A port handed to a worker never delivers here: keep only the latest few.
      if (queue.push(id) > MESSAGES_KEPT) messages.delete(queue.shift());
    };
  };
  const OrigChannel = window.MessageChannel;
  if (OrigChannel) {
    const Channel = function MessageChannel() {
      const channel = new OrigChannel();
      for (const [from, to] of [[channel.port1, channel.port2], [channel.port2, channel.port1]]) {
        const sent = trackMessages(to, () => true);
        const post = from.postMessage;
        Object.defineProperty(from, 'postMessage', {
          value: function postMessage(...args) { sent(); return post.apply(this, args); },
          configurable: true, writable: true,
        });
      }
      return channel;
    };
    Channel.prototype = OrigChannel.prototype;
    window.MessageChannel = Channel;
  }
  const origPostMessage = window.postMessage;
  const sentToSelf = trackMessages(window, (event) => event.source === window);
  window.postMessage = function postMessage(...args) {
    if (this === window) sentToSelf();
    return origPostMessage.apply(this, args);
  };
  const pendingMessages = (since) => {
    let count = 0;
    const fresh = now() - MESSAGE_TTL_MS;
    for (const [id, at] of messages) {
      if (at < fresh) messages.delete(id);
      else if (since === null || since === undefined || at >= since) count++;
    }
    return count;
  };
  // A navigation away starts here, before CDP reports any loading: remember when.
  let leavingAt = null;
  origAdd.call(window, 'beforeunload', () => { leavingAt = now(); }, true);
  // Submitting a form only plans its navigation: a task started later runs it (and only then
  // `beforeunload`), and a busy renderer may answer probes first. From the submit on, the page
  // counts as leaving, unless a handler cancelled the submit or it navigates elsewhere.
  const isThisFrame = (target) => target === '' || target === '_self'
    || (window === window.top && (target === '_top' || target === '_parent'));
  // The browsing context a submission goes to, as its target names it ('' is this frame); null
  // for a dialog's form, which goes nowhere.
  const sentInto = (form, submitter) => {
    const attr = (own, name) => ((submitter && submitter.getAttribute(own)) || form.getAttribute(name) || '').toLowerCase();
    return attr('formmethod', 'method') === 'dialog' ? null : attr('formtarget', 'target');
  };
  const leavesThisFrame = (form, submitter) => {
    const target = sentInto(form, submitter);
    return target !== null && isThisFrame(target);
  };
  let lastSubmit = null;
  origAdd.call(window, 'submit', (event) => { lastSubmit = { event, at: now() }; }, true);
  const origFormSubmit = HTMLFormElement.prototype.submit;
  HTMLFormElement.prototype.submit = function (...args) {
    if (leavesThisFrame(this, null)) leavingAt = now();
    return origFormSubmit.apply(this, args);
  };
  // A link or form that sends its document into a frame by name: the frame (maybe inside a
  // cross-site frame, out of this agent's sight) loads it, and CDP reports that load over
  // another connection, later on a busy machine. From the click on, a frame is about to load.
  const namesAFrame = (target) => target !== null && target !== '_blank' && !isThisFrame(target);
  let lastClick = null;
  // The path is there only while the event is dispatched; `defaultPrevented` is final after.
  origAdd.call(window, 'click', (event) => {
    const link = event.composedPath().find((node) => node instanceof HTMLAnchorElement && node.href);
    lastClick = link ? { event, link, at: now() } : null;
  }, true);
  const framedAt = (since) => {
    const click = lastClick && !lastClick.event.defaultPrevented
      && namesAFrame((lastClick.link.getAttribute('target') || '').toLowerCase()) ? lastClick.at : null;
    const submit = lastSubmit && !lastSubmit.event.defaultPrevented && lastSubmit.event.target instanceof HTMLFormElement
      && namesAFrame(sentInto(lastSubmit.event.target, lastSubmit.event.submitter)) ? lastSubmit.at : null;
    const at = click === null ? submit : Math.max(click, submit ?? click);
    return at === null || (since != null && at < since) ? null : Math.round(now() - at);
  };
  // Read after dispatch, when `defaultPrevented` is final.
  const submittedAt = () => {
    if (!lastSubmit) return null;
    const { event, at } = lastSubmit;
    return !event.defaultPrevented && event.target instanceof HTMLFormElement
      && leavesThisFrame(event.target, event.submitter) ? at : null;
  };
  new MutationObserver((records) => {
    if (records.some((r) => r.type !== 'attributes' || r.attributeName !== 'style')) { lastMutation = now(); wake(); }
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
  // With `seen` (the element list's), text concealed inside the element is no part of its name.
  function nameOf(el, role, seen) {
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
    const text = (seen && shownTextIn(el, seen)) ?? el.innerText;
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
  function describe(el, role, seen) {
    const item = { role, name: squash(nameOf(el, role, seen), 80) };
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
    if (el.required || el.getAttribute('aria-required') === 'true') item.required = true;
    if (el.readOnly || el.getAttribute('aria-readonly') === 'true') item.readonly = true;
    if (invalidNow(el)) item.invalid = true;
    const note = noteOf(el, item.invalid === true, item.name);
    if (note) item.note = note;
    return item;
  }
  // Invalid when the page says so, or when the control fails its constraints once a person
  // edited it or a submit was tried (`:user-invalid`; a page's untouched form is not in error).
  let userInvalidWorks = true;
  function invalidNow(el) {
    const aria = (el.getAttribute('aria-invalid') || '').trim().toLowerCase();
    if (aria !== '' && aria !== 'false') return true;
    if (!userInvalidWorks || !el.willValidate) return false;
    try { return el.matches(':user-invalid'); } catch (e) { userInvalidWorks = false; return false; }
  }
  // The shown text of the elements an attribute names by id: a hidden error says nothing now.
  function textOfIds(el, attr) {
    const ids = el.getAttribute(attr);
    if (!ids) return '';
    const root = el.getRootNode();
    return ids.split(/\s+/).map((id) => root.getElementById && root.getElementById(id))
      .filter((n) => n && (!n.checkVisibility || n.checkVisibility()))
      .map((n) => n.innerText || n.textContent).join(' ');
  }
  const NOTE_CHARS = 60; // a validation error or hint reads in one short line
  function noteOf(el, invalid, name) {
    const text = (invalid && textOfIds(el, 'aria-errormessage')) || textOfIds(el, 'aria-describedby')
      || (invalid && el.validationMessage) || '';
    const note = squash(text, NOTE_CHARS);
    return note !== name ? note : '';
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
  // Refs follow what an element shows. A windowed list (react-window and the like) reuses a
  // row's node for another row as it scrolls: the ref of "Order 33" moves with Order 33 to the
  // node that shows it now, and the ref the node had before is retired, so an old ref never
  // acts on the row that took its node. Only an element listed once, under a name listed once
  // before, moves; everything else keeps its node's ref (a button relabelled in place is
  // `changed`, not new) unless it is a link that now points elsewhere.
  let keyOfRef = new Map();   // ref -> what it showed at the last whole listing
  let refOfKey = new Map();   // what was shown once -> its ref
  const retired = new Set();
  function contentKey(item) { return item.role + '\u0001' + item.name + '\u0001' + (item.href || ''); }
  function onceEach(keys) {
    const count = new Map();
    for (const key of keys) count.set(key, (count.get(key) || 0) + 1);
    return count;
  }
  function movedRefs(keys, els, count) {
    const showing = new Map(); // a ref -> what its node shows now
    els.forEach((el, i) => { const ref = refOf.get(el); if (ref !== undefined) showing.set(ref, keys[i]); });
    const moved = new Map(); // item index -> the ref that follows its row there
    keys.forEach((key, i) => {
      const own = refOf.get(els[i]);
      if (own !== undefined && keyOfRef.get(own) === key) return;
      const ref = refOfKey.get(key);
      if (ref === undefined || count.get(key) !== 1) return;
      const now = showing.get(ref);
      if (now !== undefined && now !== key) moved.set(i, ref);
    });
    return moved;
  }
  // A link whose node now points elsewhere is another link (a reused row), not a relabelled one.
  function pointsElsewhere(before, now) {
    if (before === undefined || before === now) return false;
    const [was, is] = [before.split('\u0001'), now.split('\u0001')];
    return was[0] === 'link' && is[0] === 'link' && was[2] !== is[2];
  }
  function assignRefs(items, els, whole) {
    if (!whole) { items.forEach((item, i) => { item.ref = refFor(els[i]); }); return; }
    const keys = items.map(contentKey);
    const count = onceEach(keys);
    const moved = movedRefs(keys, els, count);
    const taken = new Set(moved.values());
    els.forEach((el, i) => {
      const own = refOf.get(el);
      let ref = moved.get(i);
      const keeps = own !== undefined && !taken.has(own) && !pointsElsewhere(keyOfRef.get(own), keys[i]);
      if (ref === undefined) ref = keeps ? own : nextRef++;
      if (own !== undefined && own !== ref && !taken.has(own)) { retired.add(own); byRef.delete(own); }
      refOf.set(el, ref);
      byRef.set(ref, new WeakRef(el));
      items[i].ref = ref;
    });
    keyOfRef = new Map(items.map((item, i) => [item.ref, keys[i]]));
    refOfKey = new Map(items.filter((_, i) => count.get(keys[i]) === 1).map((item) => [contentKey(item), item.ref]));
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

  // Foreign frames (another origin: their documents are out of reach) are read by the browser
  // layer, which tags their <iframe> with a key first; documents mark where their content goes.
  const FRAME_KEY = Symbol.for('webpilot.frame');
  const frameDocument = (el) => {
    if (el.tagName !== 'IFRAME' && el.tagName !== 'FRAME') return null;
    try { return el.contentDocument; } catch (e) { return null; }
  };
  const foreignKey = (el) => (el.tagName === 'IFRAME' || el.tagName === 'FRAME') && !frameDocument(el) ? el[FRAME_KEY] || null : null;

  // Walks the light DOM, shadow roots and same-origin iframes in document order; foreign frames
  // become marks with their content box and visible window. What a person cannot see
  // (elementConcealment) is left out, frames too.
  function collect(root, offset, view, out, seen = freshSeen()) {
    const visit = (node, insideNative, view) => {
      for (let child = node.firstElementChild; child; child = child.nextElementSibling) {
        walk(child, insideNative, view);
      }
    };
    // What a scrolling box shows of its content: its content is seen through it (a windowed
    // list's rows above and below its window are off-screen, whatever the viewport shows).
    const scrolledView = (el, view) => {
      if (el.scrollHeight <= el.clientHeight + 1 && el.scrollWidth <= el.clientWidth + 1) return view;
      const doc = el.ownerDocument;
      if (el === doc.documentElement || el === doc.body) return view;
      const style = doc.defaultView.getComputedStyle(el);
      if (style.overflowX === 'visible' && style.overflowY === 'visible') return view;
      const r = el.getBoundingClientRect();
      return { x: offset.x + r.left + el.clientLeft, y: offset.y + r.top + el.clientTop,
        w: el.clientWidth, h: el.clientHeight, parent: view };
    };
    // A frame's document is walked in place; a foreign frame leaves a mark with its content box
    // and visible window.
    const walkFrame = (el, view) => {
      if (el.clientWidth <= 0 || el.clientHeight <= 0 || elementConcealment(el, seen)) return;
      const inner = frameOffset(el, offset);
      const doc = frameDocument(el);
      if (doc) {
        if (doc.documentElement) {
          const innerView = { x: inner.x, y: inner.y, w: el.clientWidth, h: el.clientHeight, parent: view };
          collect(doc.documentElement, inner, innerView, out, seen);
        }
      } else if (el[FRAME_KEY]) {
        const part = clip({ x: inner.x, y: inner.y, w: el.clientWidth, h: el.clientHeight }, view);
        out.push({ frame: el[FRAME_KEY], x: inner.x, y: inner.y, view: part });
      }
    };
    const walk = (el, insideNative, view) => {
      const tag = el.tagName;
      if (tag === 'SCRIPT' || tag === 'STYLE' || tag === 'TEMPLATE') return;
      const style = el.checkVisibility ? el.checkVisibility({ visibilityProperty: false }) : true;
      if (!style) return;
      if (tag === 'IFRAME' || tag === 'FRAME') { walkFrame(el, view); return; }
      const role = roleOf(el);
      const weak = !role && !insideNative && weakInteractive(el);
      let entry = null;
      if (role || weak) {
        const box = visibleBox(el, offset);
        if (box && !elementConcealment(el, seen)) {
          entry = { el, role: role || 'clickable', weak, box, view };
          out.push(entry);
        }
      }
      const before = out.length;
      const shadow = shadowOf(el);
      const inner = el.firstElementChild || shadow ? scrolledView(el, view) : view;
      if (shadow) visit(shadow, insideNative || !!role, inner);
      visit(el, insideNative || (!!role && role !== 'listbox'), inner);
      // A container whose listener serves the controls inside it is not itself a control.
      if (entry && entry.weak && out.length > before) out.splice(out.indexOf(entry), 1);
    };
    walk(root, false, view);
  }
  function inView(box, view) {
    for (let v = view; v; v = v.parent) {
      if (box.x + box.w <= v.x || box.y + box.h <= v.y || box.x >= v.x + v.w || box.y >= v.y + v.h) return false;
    }
    return true;
  }
  // The part of `rect` visible through `view` and its ancestors, as one rectangle.
  function clip(rect, view) {
    let { x, y } = rect;
    let right = rect.x + rect.w;
    let bottom = rect.y + rect.h;
    for (let v = view; v; v = v.parent) {
      x = Math.max(x, v.x); y = Math.max(y, v.y);
      right = Math.min(right, v.x + v.w); bottom = Math.min(bottom, v.y + v.h);
    }
    return [x, y, Math.max(0, right - x), Math.max(0, bottom - y)].map(Math.round);
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
    const seen = freshSeen();
    if (root) collect(root, { x: 0, y: 0 }, top, found, seen);
    const items = [];
    const els = [];
    const marks = [];
    for (const f of found) {
      if (f.frame) {
        marks.push({ key: f.frame, at: items.length, x: f.x, y: f.y, view: f.view });
        continue;
      }
      const item = describe(f.el, f.role, seen);
      els.push(f.el);
      item.box = [f.box.x, f.box.y, f.box.w, f.box.h].map(Math.round);
      if (!inView(f.box, f.view)) item.offscreen = true;
      items.push(item);
    }
    assignRefs(items, els, !selector);
    const de = document.documentElement; // null while a new document is being created
    return { doc: docId, origin: location.origin, first: firstRef, next: nextRef, items, frames: marks,
      scroll: [Math.round(window.scrollX), Math.round(window.scrollY),
        de ? de.scrollWidth : 0, de ? de.scrollHeight : 0] };
  }

  // Resolves a ref of this document to its element, or says why it cannot.
  function resolve(ref) {
    if (firstRef === null || ref < firstRef) return { status: 'stale', why: 'the page has loaded a new document since' };
    if (ref >= nextRef) return { status: 'unknown' };
    if (retired.has(ref)) return { status: 'stale', why: 'its node now shows another item (a windowed list reused it)' };
    const weak = byRef.get(ref);
    const el = weak && weak.deref();
    if (!el || !el.isConnected) return { status: 'stale', why: 'the element was removed from the page' };
    return { status: 'ok', el };
  }

  // Whether the page shows `text`, in the light DOM or in a shadow root.
  function hasText(text) {
    if (document.body && document.body.innerText.includes(text)) return true;
    for (const weak of attachedRoots) {
      const root = weak.deref();
      if (!root) { attachedRoots.delete(weak); continue; }
      if (root.host && root.host.isConnected && root.textContent.includes(text)) return true;
    }
    return false;
  }
  function textMatches(query) {
    if (!query) return false;
    try { if (document.querySelector(query)) return true; } catch (e) { /* not a selector */ }
    return hasText(query);
  }

  const startedSince = (pending, since) => {
    if (since === null || since === undefined) return pending.size;
    let count = 0;
    for (const at of pending.values()) if (at >= since) count++;
    return count;
  };
  // Busy-ness for readiness; with `since` (a `now()` of this document), only work started since.
  // Milliseconds since this document, or a same-origin frame inside it, started leaving (a
  // form it submitted, a link it followed): a frame's new document is part of the page's
  // answer, and the frame's agent sees it leave before CDP reports any loading.
  function leavingMs() {
    const submitted = submittedAt();
    const at = submitted === null ? leavingAt : Math.max(submitted, leavingAt ?? submitted);
    let least = at === null ? null : Math.round(now() - at);
    for (let i = 0; i < window.frames.length; i++) {
      let ms = null;
      try { ms = window.frames[i].__wp ? window.frames[i].__wp.leavingMs() : null; } catch (e) { /* another origin */ }
      if (ms !== null && (least === null || ms < least)) least = ms;
    }
    return least;
  }
  function state(waitFor, since) {
    return {
      doc: docId,
      readyState: document.readyState,
      timers: startedSince(timers, since),
      frames: startedSince(frames, since),
      requests: startedSince(requests, since),
      messages: pendingMessages(since),
      quietMs: Math.round(now() - Math.max(lastMutation, lastActivity)),
      leavingMs: leavingMs(),
      framedMs: framedAt(since),
      // A document without scripts changes only while it loads: once loaded, it is settled.
      unscripted: document.scripts.length === 0,
      found: waitFor ? textMatches(waitFor) : null,
    };
  }

  // ---- reading: the rendered tree ----------------------------------------------------------
  const SKIPPED = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE']);
  const CHROME = 'nav,aside,footer,[role=navigation],[role=contentinfo]';
  // Slots and other `display: contents` boxes have no box of their own: they show as much as
  // what holds them.
  const visible = (el) => !el.checkVisibility || el.checkVisibility()
    || (el.ownerDocument.defaultView.getComputedStyle(el).display === 'contents'
      && !!renderedParent(el) && renderedParent(el).nodeType === 1 && visible(renderedParent(el)));
  const isBlock = (el) => {
    const display = el.ownerDocument.defaultView.getComputedStyle(el).display;
    return !display.startsWith('inline') && display !== 'contents';
  };
  // Children as rendered: a shadow host shows its shadow tree, a slot what is assigned to it, a
  // same-origin frame its document.
  function renderedChildren(node) {
    const shadow = node.nodeType === 1 ? shadowOf(node) : null;
    if (shadow) return Array.from(shadow.childNodes);
    if (node.tagName === 'SLOT') {
      const assigned = node.assignedNodes();
      return Array.from(assigned.length ? assigned : node.childNodes);
    }
    const doc = node.nodeType === 1 ? frameDocument(node) : null;
    if (doc) return doc.body ? [doc.body] : [];
    return Array.from(node.childNodes);
  }
  function renderedParent(node) {
    if (node.assignedSlot) return node.assignedSlot;
    const parent = node.parentNode;
    if (parent && parent.nodeType === 11) return parent.host || null;
    if (parent && parent.nodeType === 9) return parent.defaultView && parent.defaultView.frameElement;
    return parent;
  }
  // Elements whose rendered content is not their light DOM (shadow hosts, frames and all their
  // ancestors): only these are walked node by node; below them the browser's own text and
  // clones serve.
  function unusualPaths() {
    const unusual = new Set();
    const mark = (el) => { for (let n = el; n && !unusual.has(n); n = renderedParent(n)) unusual.add(n); };
    const scan = (scope) => {
      for (const el of scope.querySelectorAll('*')) {
        // A slot shows what is assigned to it, not its own children.
        if (el.tagName === 'SLOT' && scope.nodeType === 11) mark(el);
        const shadow = shadowOf(el);
        if (shadow) { mark(el); scan(shadow); }
        if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
          mark(el);
          const doc = frameDocument(el);
          if (doc) scan(doc);
        }
      }
    };
    scan(document);
    return unusual;
  }
  const frameMark = (key) => '\uE000' + key + '\uE001';

  // What a reader sees of `root`, like innerText, with shadow roots and same-origin frames in
  // place and foreign frames as marks.
  // ---- concealed text and elements ---------------------------------------------------------
  // Text a person cannot see is not page content: pages hide instructions to a model in it. An
  // element's own text is concealed when the element is hidden with its ancestors (display,
  // visibility, opacity), its font is under 2 px, its colour is its background's, it is clipped
  // away or shrunk to nothing inside a box that hides overflow, or it sits off the page.
  const INSTRUCTIONS = /ignore (all |any )?(the )?(previous|prior|above|earlier) (instructions|prompts?|messages)|disregard (all |the )?(previous|prior|above)|you are now\b|(^|\n)\s*(system|assistant)\s*:|new instructions|do not tell the user|(browser_\w+|open_web_page|web_search|crawl_batch)\b|send (it|this|them|the \w+) to https?:/i;
  const rgb = (colour) => {
    const m = /rgba?\(([\d.]+),?\s*([\d.]+),?\s*([\d.]+)(?:[,/]\s*([\d.]+))?/.exec(colour || '');
    return m ? { r: +m[1], g: +m[2], b: +m[3], a: m[4] === undefined ? 1 : +m[4] } : null;
  };
  // Each element's style, box, background, clipping and verdict is looked up once per read.
  const freshSeen = () => ({ styles: new Map(), grounds: new Map(), hidden: new Map(), widths: new Map(),
    hosts: new Map(), elements: new Map() });
  const styleOf = (el, seen) => {
    let s = seen.styles.get(el);
    if (!s) { s = el.ownerDocument.defaultView.getComputedStyle(el); seen.styles.set(el, s); }
    return s;
  };
  function backgroundOf(el, seen) {
    if (!el || el.nodeType !== 1) return { r: 255, g: 255, b: 255, a: 1 };
    if (seen.grounds.has(el)) return seen.grounds.get(el);
    const s = styleOf(el, seen);
    const own = rgb(s.backgroundColor);
    // A picture behind the text: its colour is unknown.
    const ground = s.backgroundImage && s.backgroundImage !== 'none' ? null
      : own && own.a > 0.5 ? own : backgroundOf(renderedParent(el), seen);
    seen.grounds.set(el, ground);
    return ground;
  }
  // What hides an element and everything in it, from its own style or one holding it: no
  // display, opacity 0, its content clipped away, or no size while it hides its overflow.
  function hiddenWithin(el, seen) {
    if (!el || el.nodeType !== 1) return '';
    if (seen.hidden.has(el)) return seen.hidden.get(el);
    const s = styleOf(el, seen);
    let why = '';
    if (s.display === 'none') why = 'hidden';
    else if (Number(s.opacity) === 0) why = 'hidden';
    else if (/rect\(0(px)?,? ?0(px)?,? ?0(px)?,? ?0(px)?\)/.test(s.clip) || /inset\((50|100)%/.test(s.clipPath)) why = 'clipped';
    else if (s.overflow !== 'visible') {
      const r = el.getBoundingClientRect();
      if (r.width <= 1 || r.height <= 1) why = 'no size';
    }
    if (!why) why = hiddenWithin(renderedParent(el), seen);
    seen.hidden.set(el, why);
    return why;
  }
  // Whether no scroll brings `el` into view: left of or above the page, or right of its width
  // (a box of no size at the page's very corner is only empty, not away).
  function offPage(el, seen) {
    const view = el.ownerDocument.defaultView;
    const r = el.getBoundingClientRect();
    const [left, top] = [r.left + view.scrollX, r.top + view.scrollY];
    const away = (far, size, near) => far <= 0 && (size > 0 || near < 0);
    return away(left + r.width, r.width, left) || away(top + r.height, r.height, top)
      || left >= pageWidth(el.ownerDocument, seen) ? 'off the page' : '';
  }
  function concealment(el, seen) {
    if (seen.hosts.has(el)) return seen.hosts.get(el);
    const why = textConcealment(el, seen);
    seen.hosts.set(el, why);
    return why;
  }
  function textConcealment(el, seen) {
    const s = styleOf(el, seen);
    // Visibility is inherited but a child may show itself again: the element's own value says.
    if (s.visibility !== 'visible') return 'hidden';
    const within = hiddenWithin(el, seen);
    if (within) return within;
    if (parseFloat(s.fontSize) < 2) return 'tiny font';
    const ink = rgb(s.color);
    if (ink && ink.a < 0.1) return 'transparent text';
    const ground = ink && backgroundOf(el, seen);
    if (ground && Math.abs(ink.r - ground.r) + Math.abs(ink.g - ground.g) + Math.abs(ink.b - ground.b) < 12) return 'text the colour of its background';
    if (parseFloat(s.textIndent) < -500) return 'off the page';
    return offPage(el, seen);
  }
  // How wide a document's page is, once per read.
  function pageWidth(doc, seen) {
    let width = seen.widths.get(doc);
    if (width === undefined) {
      width = Math.max(doc.documentElement.scrollWidth, doc.defaultView.innerWidth);
      seen.widths.set(doc, width);
    }
    return width;
  }
  // Elements that lead somewhere, show a picture or take input: hidden by the rules above
  // (their own style or an ancestor's) or off the page, they are left out whole, address and
  // all; a link or button also when all it shows is concealed text. A control hidden behind a
  // label a person sees and clicks (a styled checkbox) stays.
  const CARRIERS = new Set(['A', 'AREA', 'IMG', 'PICTURE', 'VIDEO', 'AUDIO', 'IFRAME', 'FRAME', 'EMBED',
    'OBJECT', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA']);
  const MEDIA = 'img,svg,picture,video,canvas,object,embed,input,select,textarea,iframe';
  const carries = (el) => (el.tagName === 'A' ? el.hasAttribute('href')
    : el.tagName === 'INPUT' ? el.type !== 'hidden' : CARRIERS.has(el.tagName)) || !!roleOf(el) || weakInteractive(el);
  function elementConcealment(el, seen) {
    if (seen.elements.has(el)) return seen.elements.get(el);
    // Concealed while judged: a label holding its control does not vouch for itself.
    seen.elements.set(el, 'hidden');
    const s = styleOf(el, seen);
    let why = s.visibility !== 'visible' ? 'hidden' : hiddenWithin(el, seen) || offPage(el, seen);
    if (!why && !el.matches(MEDIA)) why = showsOnlyConcealed(el, seen);
    if (why && el.labels && Array.from(el.labels).some((label) => !elementConcealment(label, seen))) why = '';
    seen.elements.set(el, why);
    return why;
  }
  // Why all `el` shows is concealed text (or, for a link, nothing at all); '' when it shows
  // visible text or a mark of its own (a picture, a background, a border, an icon).
  function showsOnlyConcealed(el, seen) {
    if (shadowOf(el)) return '';
    let why = null;
    const walker = el.ownerDocument.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (!node.data.trim() || node.parentNode.nodeType !== 1 || SKIPPED.has(node.parentNode.tagName)) continue;
      const hidden = concealment(node.parentNode, seen);
      if (!hidden) return '';
      why = why || hidden;
    }
    if (why === null && el.tagName !== 'A') return '';
    return marked(el, seen) ? '' : why || 'nothing to see';
  }
  function marked(el, seen) {
    const inner = Array.from(el.querySelectorAll('*'));
    if (inner.some((n) => n.matches(MEDIA) && !elementConcealment(n, seen))) return true;
    // A mark too small to see is none.
    const r = el.getBoundingClientRect();
    if (r.width < 4 || r.height < 4) return false;
    const ground = backgroundOf(renderedParent(el), seen);
    return [el, ...inner].some((n) => ownMark(n, seen, ground));
  }
  // A background picture or colour, a border, or an icon drawn before or after the content.
  function ownMark(n, seen, ground) {
    const s = styleOf(n, seen);
    if (s.backgroundImage !== 'none' || parseFloat(s.borderTopWidth) + parseFloat(s.borderBottomWidth) > 0) return true;
    const own = rgb(s.backgroundColor);
    if (own && own.a > 0.5 && ground && Math.abs(own.r - ground.r) + Math.abs(own.g - ground.g) + Math.abs(own.b - ground.b) >= 12) return true;
    const view = n.ownerDocument.defaultView;
    return ['::before', '::after'].some((pseudo) => {
      const content = view.getComputedStyle(n, pseudo).content;
      return !!content && content !== 'none' && content !== 'normal' && content !== '""';
    });
  }
  // The text `el` shows a person when some of its text is concealed (null when none is).
  function shownTextIn(el, seen) {
    const parts = [];
    let hidden = false;
    const walker = el.ownerDocument.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const host = node.parentNode;
      if (!node.data.trim() || host.nodeType !== 1 || SKIPPED.has(host.tagName)) continue;
      if (!concealment(host, seen)) parts.push(node.data);
      // What innerText leaves out (no box, visibility) needs no other name.
      else if (visible(host) && styleOf(host, seen).visibility === 'visible') hidden = true;
    }
    return hidden ? parts.join(' ') : null;
  }
  // At most 100 characters of concealed text for a warning, any address in it cut to its host.
  const URLISH = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+|\b(?:(?:[a-z0-9-]+\.)+[a-z]{2,}|\d{1,3}(?:\.\d{1,3}){3})(?::\d+)?[/?#][^\s"'<>]*/gi;
  const quote = (text) => squash(text.replace(URLISH, (url) => {
    try { return new URL(url.includes('://') ? url : 'http://' + url).hostname; } catch (e) { return '…'; }
  }), 100);
  // What under `root` (shadow roots and same-origin frames included) is concealed: `text`, the
  // elements whose own text is, and `elements`, those left out whole; what they held is kept
  // for `concealedReport` (characters of text, plus one per element). `unusual`
  // (unusualPaths): below the rest, the browser's own walker finds them.
  let lastConcealed = { dropped: 0, warnings: [] };
  function concealedIn(root, unusual) {
    const seen = freshSeen();
    const report = { dropped: 0, warnings: [] };
    const concealed = { text: new Set(), elements: new Set() };
    const judge = (node) => {
      const text = node.data.trim();
      const host = node.parentNode;
      if (!text || !host || host.nodeType !== 1 || SKIPPED.has(host.tagName)) return;
      const why = concealment(host, seen);
      if (!why) return;
      concealed.text.add(host);
      report.dropped += text.length;
      if (INSTRUCTIONS.test(text) && report.warnings.length < 5) {
        report.warnings.push({ kind: 'instructions_in_page', excerpt: quote(text), where: `hidden: ${why}` });
      }
    };
    const judgeElement = (el) => {
      if (carries(el) && elementConcealment(el, seen)) { concealed.elements.add(el); report.dropped++; }
    };
    const visit = (node) => {
      if (node.nodeType === 3) { judge(node); return; }
      if (node.nodeType !== 1 || SKIPPED.has(node.tagName) || node.tagName === 'HEAD') return;
      judgeElement(node);
      if (foreignKey(node)) return;
      // The head shows nothing: the root's other children are walked on their own.
      if (unusual.has(node) || node === node.ownerDocument.documentElement) {
        renderedChildren(node).forEach(visit);
        return;
      }
      // No shadow root, slot or frame below: every node is a plain descendant.
      const walker = node.ownerDocument.createTreeWalker(node, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
      while (walker.nextNode()) {
        const n = walker.currentNode;
        if (n.nodeType === 3) judge(n);
        else if (!SKIPPED.has(n.tagName)) judgeElement(n);
      }
    };
    if (root) visit(root);
    lastConcealed = report;
    return concealed;
  }
  const concealedReport = () => lastConcealed;

  function readText(root) {
    // A document without a body (an error page while it loads, one a script emptied) or even
    // a root element shows nothing.
    if (!root) return '';
    const unusual = unusualPaths();
    const concealed = concealedIn(root, unusual);
    // What is concealed is left out by walking down to it.
    for (const host of [...concealed.text, ...concealed.elements]) {
      for (let n = host; n && !unusual.has(n); n = renderedParent(n)) unusual.add(n);
    }
    if (!unusual.has(root)) return root.innerText ?? root.textContent;
    const out = [];
    const visit = (node) => {
      if (node.nodeType === 3) { if (!concealed.text.has(node.parentNode)) out.push(node.data.replace(/\s+/g, ' ')); return; }
      if (node.nodeType !== 1 || SKIPPED.has(node.tagName) || concealed.elements.has(node)) return;
      const key = foreignKey(node);
      if (key) { out.push('\n' + frameMark(key) + '\n'); return; }
      if (!visible(node)) return;
      const block = isBlock(node);
      if (block) out.push('\n');
      if (unusual.has(node)) renderedChildren(node).forEach(visit);
      else out.push(node.innerText);
      if (block) out.push('\n');
    };
    visit(root);
    return out.join('').replace(/[ \t]*\n[ \t]*/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
  }

  // The main content root: <main>, else the longest <article>, else the body.
  function mainRoot() {
    const articles = Array.from(document.querySelectorAll('article'))
      .sort((a, b) => b.innerText.length - a.innerText.length);
    return document.querySelector('main, [role=main]') || articles[0] || document.body || document.documentElement;
  }
  // A copy of an ordinary subtree for Markdown: hidden parts dropped, links and images absolute.
  function plainCopy(el, main, concealed) {
    const hidden = new Set();
    el.querySelectorAll('*').forEach((n) => { if (!visible(n)) hidden.add(n); });
    const copy = el.cloneNode(true);
    const originals = [el, ...el.querySelectorAll('*')];
    const copies = [copy, ...copy.querySelectorAll('*')];
    copies.forEach((c, i) => {
      const o = originals[i];
      if ((hidden.has(o) && o.tagName !== 'OPTION') || concealed.elements.has(o)) { c.setAttribute('data-wp-drop', ''); return; }
      if (concealed.text.has(o)) for (const t of [...c.childNodes]) if (t.nodeType === 3) t.remove();
      absolutize(o, c);
    });
    copy.querySelectorAll('script,style,noscript,template,[data-wp-drop]' + (main ? ',' + CHROME : '')).forEach((n) => n.remove());
    return copy;
  }
  function absolutize(original, copy) {
    if (original.tagName === 'A' && original.hasAttribute('href')) copy.setAttribute('href', original.href);
    if (original.tagName === 'IMG' && original.getAttribute('src')) copy.setAttribute('src', original.src);
  }
  // HTML of `root` prepared for Markdown, with shadow roots and same-origin frames in place and
  // foreign frames as <wp-frame> marks; `main` picks the main content and drops navigation.
  function readable(root, main) {
    if (main && root && (root === document.documentElement || root === document.body)) root = mainRoot();
    if (!root) return '';
    const unusual = unusualPaths();
    const concealed = concealedIn(root, unusual);
    const copyOf = (node) => {
      if (node.nodeType === 3) return concealed.text.has(node.parentNode) ? null : document.createTextNode(node.data);
      if (node.nodeType !== 1 || SKIPPED.has(node.tagName) || concealed.elements.has(node)) return null;
      const key = foreignKey(node);
      if (key) {
        const mark = document.createElement('wp-frame');
        mark.setAttribute('data-key', key);
        return mark;
      }
      if (main && node.matches(CHROME)) return null;
      if (!visible(node)) return null;
      if (!unusual.has(node)) return plainCopy(node, main, concealed);
      // Custom elements, slots and frames become plain boxes: copying them would run page code.
      const plain = node.tagName.includes('-') || node.tagName === 'SLOT' || frameDocument(node);
      const copy = plain ? document.createElement(isBlock(node) ? 'div' : 'span') : node.cloneNode(false);
      if (!plain) absolutize(node, copy);
      for (const child of renderedChildren(node)) {
        const inner = copyOf(child);
        if (inner) copy.append(inner);
      }
      return copy;
    };
    const copy = copyOf(root);
    return copy ? copy.outerHTML : '';
  }
  // The HTML of `root` as its reader would extract from it: the document's head as it is, of
  // the rest what a person can see (concealed elements and hidden parts gone, concealed text
  // emptied). Shadow roots and frames are not in it, as in outerHTML.
  const KEPT = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'OPTION', 'OPTGROUP']);
  function shownHtml(root) {
    if (!root) return '';
    const concealed = concealedIn(root, unusualPaths());
    const head = root.ownerDocument.head;
    const copy = root.cloneNode(true);
    const originals = [root, ...root.querySelectorAll('*')];
    const copies = [copy, ...copy.querySelectorAll('*')];
    copies.forEach((c, i) => {
      const o = originals[i];
      if (o === head || (head && head.contains(o)) || o === root.ownerDocument.documentElement) return;
      if (concealed.elements.has(o) || (!KEPT.has(o.tagName) && !visible(o))) c.setAttribute('data-wp-drop', '');
      else if (concealed.text.has(o)) for (const t of [...c.childNodes]) if (t.nodeType === 3) t.remove();
    });
    copy.querySelectorAll('[data-wp-drop]').forEach((n) => n.remove());
    return copy.outerHTML;
  }

  // ---- find ---------------------------------------------------------------------------------
  const HEADING = /^H([1-6])$/;
  function headingLevel(el) {
    const tag = HEADING.exec(el.tagName);
    if (tag) return Number(tag[1]);
    if (el.getAttribute('role') === 'heading') return Number(el.getAttribute('aria-level')) || 2;
    return 0;
  }
  // Whether `inner` sits inside `outer`, across shadow roots.
  function within(inner, outer) {
    for (let n = inner; n; n = n.parentNode || n.host) if (n === outer) return true;
    return false;
  }
  // The text of `block` as a person sees it: its innerText, unless something in it is concealed.
  function shownText(block, concealed) {
    if (![...concealed.text, ...concealed.elements].some((n) => within(n, block))) return block.innerText;
    const parts = [];
    const walk = (node) => {
      if (node.nodeType === 3) { if (!concealed.text.has(node.parentNode)) parts.push(node.data); return; }
      if (node.nodeType !== 1 || SKIPPED.has(node.tagName) || concealed.elements.has(node) || !visible(node)) return;
      const gap = isBlock(node) ? ' ' : '';
      parts.push(gap);
      node.childNodes.forEach(walk);
      parts.push(gap);
    };
    walk(block);
    return parts.join('');
  }
  // Text matches of `query` in document order, each with its heading path and the refs of its
  // own section (the element holding it, else the nearest before and after); foreign frames
  // as marks with the heading path at their place.
  function find(query, limit) {
    const needle = query.toLowerCase();
    const concealed = concealedIn(document.body || document.documentElement, unusualPaths());
    const headings = [];
    const sequence = []; // headings, refd elements and matches in document order
    const hits = [];
    const marks = [];
    const path = () => headings.map((h) => h.text);
    const visit = (node) => {
      if (node.nodeType === 3) {
        if (hits.length >= limit || !node.data.toLowerCase().includes(needle)) return;
        const host = node.parentElement || (node.parentNode && node.parentNode.host);
        if (!host || !visible(host) || concealed.text.has(host)) return;
        const block = host.closest('p,li,td,th,h1,h2,h3,h4,h5,h6,section,article,div,label,button,a') || host;
        const text = (shownText(block, concealed) || node.data).replace(/\s+/g, ' ');
        const pos = Math.max(0, text.toLowerCase().indexOf(needle));
        const context = (pos > 80 ? '…' : '') + text.slice(Math.max(0, pos - 80), pos + needle.length + 80) +
          (pos + needle.length + 80 < text.length ? '…' : '');
        const hit = { context, section: path(), host, at: sequence.length };
        hits.push(hit);
        sequence.push({ hit });
        return;
      }
      if (node.nodeType !== 1 || SKIPPED.has(node.tagName) || concealed.elements.has(node)) return;
      const key = foreignKey(node);
      if (key) { marks.push({ key, at: hits.length, section: path() }); return; }
      const level = headingLevel(node);
      if (level && visible(node)) {
        while (headings.length && headings[headings.length - 1].level >= level) headings.pop();
        headings.push({ level, text: squash(node.innerText, 60) });
        sequence.push({ heading: level });
      }
      const ref = refOf.get(node);
      if (ref !== undefined && node.isConnected) sequence.push({ ref, el: node });
      renderedChildren(node).forEach(visit);
    };
    const root = document.body || document.documentElement;
    if (root) visit(root);
    return {
      hits: hits.map((hit) => ({ context: hit.context, section: hit.section, refs: sectionRefs(sequence, hit) })),
      frames: marks,
    };
  }
  // Refs of the match's own section: those holding it or held by its block, else the nearest
  // before and after it, never across a heading.
  function sectionRefs(sequence, hit) {
    let start = hit.at;
    while (start > 0 && !sequence[start - 1].heading) start--;
    let end = hit.at + 1;
    while (end < sequence.length && !sequence[end].heading) end++;
    const section = sequence.slice(start, end).filter((entry) => entry.ref !== undefined);
    const holding = section.filter((entry) => within(hit.host, entry.el) || within(entry.el, hit.host));
    if (holding.length) return holding.slice(0, 3).map((entry) => entry.ref);
    const before = sequence.slice(start, hit.at).filter((entry) => entry.ref !== undefined).pop();
    const after = sequence.slice(hit.at + 1, end).find((entry) => entry.ref !== undefined);
    return [before, after].filter(Boolean).map((entry) => entry.ref);
  }

  // ---- pointing: where a real pointer event reaches an element ------------------------------
  // Moves a point of `view`'s viewport up through same-origin frames to the highest viewport
  // this document can reach; `local` when that is not the top one (a foreign frame's own).
  function reachTop(view, x, y) {
    for (let w = view; w !== w.parent; w = w.parent) {
      let frame = null;
      try { frame = w.frameElement; } catch (e) { frame = null; }
      if (!frame) return { x, y, local: true };
      const r = frame.getBoundingClientRect();
      const s = w.parent.getComputedStyle(frame);
      x += r.left + parseFloat(s.borderLeftWidth) + parseFloat(s.paddingLeft);
      y += r.top + parseFloat(s.borderTopWidth) + parseFloat(s.paddingTop);
    }
    return { x, y, local: false };
  }
  // What would take a pointer event at (x, y) of `el`'s viewport instead of `el`, described;
  // null when `el` (or its label) gets it.
  function coveredBy(el, x, y) {
    const root = el.getRootNode();
    let hit = (root.elementFromPoint ? root : el.ownerDocument).elementFromPoint(x, y);
    for (let inner = hit && shadowOf(hit); inner; inner = hit && shadowOf(hit)) {
      const deeper = inner.elementFromPoint(x, y);
      if (!deeper || deeper === hit) break;
      hit = deeper;
    }
    if (!hit || within(hit, el) || hit.control === el || (el.labels && Array.from(el.labels).includes(hit))) return null;
    const text = squash(hit.innerText, 60);
    const id = hit.id ? '#' + hit.id : '';
    const cls = typeof hit.className === 'string' && hit.className.trim() ? '.' + hit.className.trim().split(/\s+/).join('.') : '';
    return `<${hit.tagName.toLowerCase()}${id}${cls}>` + (text ? ` "${text}"` : '');
  }
  const outside = (view, x, y) => x < 0 || y < 0 || x >= view.innerWidth || y >= view.innerHeight;
  // Scrolls `el` into view if needed and checks that a pointer event at its centre reaches
  // it; returns the centre in the highest viewport this document reaches.
  function aim(el) {
    const view = el.ownerDocument.defaultView;
    let r = el.getBoundingClientRect();
    const scrolled = r.top < 0 || r.left < 0 || r.bottom > view.innerHeight || r.right > view.innerWidth;
    if (scrolled) {
      el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      r = el.getBoundingClientRect();
    }
    const style = view.getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || style.visibility === 'hidden' || style.display === 'none') {
      return { problem: 'invisible', detail: 'it has no visible box' };
    }
    if (el.disabled || el.getAttribute('aria-disabled') === 'true') return { problem: 'disabled' };
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    const cover = coveredBy(el, x, y);
    if (cover) return { problem: 'covered', detail: cover };
    return { ...reachTop(view, x, y), scrolled };
  }
  // The same for a point (px, py) of a foreign frame's viewport, seen through its <iframe>
  // `frame` of this document: scrolls the point into view, checks nothing covers the frame there.
  // With `reveal`, only brings the point into view (a capture does not mind what covers it).
  function aimThrough(frame, px, py, reveal) {
    const view = frame.ownerDocument.defaultView;
    const at = () => {
      const r = frame.getBoundingClientRect();
      const s = view.getComputedStyle(frame);
      return { x: r.left + parseFloat(s.borderLeftWidth) + parseFloat(s.paddingLeft) + px,
        y: r.top + parseFloat(s.borderTopWidth) + parseFloat(s.paddingTop) + py };
    };
    let point = at();
    const scrolled = outside(view, point.x, point.y);
    if (scrolled) {
      frame.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      point = at();
      // A frame larger than the viewport: bring the point itself to the middle.
      if (outside(view, point.x, point.y)) {
        view.scrollBy(point.x - view.innerWidth / 2, point.y - view.innerHeight / 2);
        point = at();
      }
    }
    const cover = !reveal && coveredBy(frame, point.x, point.y);
    if (cover) return { problem: 'covered', detail: cover };
    return { ...reachTop(view, point.x, point.y), scrolled };
  }

  // The interactive elements of this document (same-origin frames included) in order, with
  // their role and name: what identities are counted and matched among.
  function listed() {
    const top = { x: 0, y: 0, w: innerWidth, h: innerHeight, parent: null };
    const found = [];
    collect(document.documentElement, { x: 0, y: 0 }, top, found);
    return found.filter((f) => f.el).map((f) => ({ el: f.el, role: f.role, name: squash(nameOf(f.el, f.role), 80) }));
  }
  const STABLE = ['id', 'name', 'data-testid', 'aria-label', 'href', 'type'];
  const shown = (el) => (el.checkVisibility ? el.checkVisibility({ visibilityProperty: false }) : true);
  // Who the element behind `ref` is in terms that survive a re-render (a trace's record of what
  // an action acted on): role, name, the nth of that role and name here, stable attributes.
  function identify(ref) {
    const found = resolve(ref);
    return found.status === 'ok' ? identityOf(found.el) : null;
  }
  function identityOf(el) {
    const role = roleOf(el) || 'clickable';
    const name = squash(nameOf(el, role), 80);
    // Counted among the same tag (and explicit role) in the element's own root: cheap enough
    // to run before every action.
    const root = el.getRootNode();
    const explicit = el.getAttribute('role');
    const peers = root.querySelectorAll(explicit ? `${el.tagName},[role="${CSS.escape(explicit)}"]` : el.tagName);
    let nth = 0;
    for (const peer of peers) {
      if (peer === el) break;
      if (!shown(peer)) continue;
      const peerRole = roleOf(peer) || 'clickable';
      if (peerRole === role && squash(nameOf(peer, peerRole), 80) === name) nth++;
    }
    const me = { role, name };
    const attributes = {};
    for (const a of STABLE) { const v = el.getAttribute(a); if (v) attributes[a] = v; }
    return { role: me.role, name: me.name, nth, tag: el.tagName.toLowerCase(), attributes,
      origin: location.origin, path: location.pathname };
  }
  // What a person's input through the live view reached, for a trace: the element at (x, y) of
  // the viewport (the interactive one holding it), or the focused field; a frame of another
  // site is named by its address, with the point inside it. `secret`: a password field.
  const INTERACTIVE = 'a[href],button,input,select,textarea,summary,label,[role],[onclick],[tabindex],[contenteditable]';
  function reached(el, x, y) {
    if (!el) return null;
    if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') {
      const r = el.getBoundingClientRect();
      const url = new URL(el.src || 'about:blank', location.href);
      const frame = { origin: url.origin, path: url.pathname };
      if (Number.isFinite(x)) Object.assign(frame, { x: x - r.left, y: y - r.top });
      return { frame };
    }
    const target = el.closest(INTERACTIVE) || el;
    return { identity: identityOf(target), secret: target.type === 'password' };
  }
  function personAt(x, y) {
    let el = document.elementFromPoint(x, y);
    while (el && el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === el) break;
      el = inner;
    }
    return reached(el, x, y);
  }
  function personFocus() {
    let el = document.activeElement;
    while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
    return el && el !== document.body ? reached(el, NaN, NaN) : null;
  }

  // Finds an identity again: the same stable attributes (exact), else the nth element of the same
  // role and name, else the closest by role and name. Answers its ref (the element list must
  // have numbered it), how it was found, and the nearest candidates.
  function locate(identity) {
    const all = listed();
    const attrs = Object.entries(identity.attributes || {}).filter(([k]) => k !== 'href' && k !== 'type');
    // Counted the way `identify` counted: the same tag, role and name, in document order.
    const same = Array.from(document.querySelectorAll(identity.tag || '*'))
      .map((el) => ({ el, role: roleOf(el) || 'clickable' }))
      .filter((e) => shown(e.el) && e.role === identity.role && squash(nameOf(e.el, e.role), 80) === identity.name);
    const exact = attrs.length && all.filter((e) => attrs.every(([k, v]) => e.el.getAttribute(k) === v));
    const bigrams = (t) => { const s = t.toLowerCase(); const out = []; for (let i = 0; i < s.length - 1; i++) out.push(s.slice(i, i + 2)); return out; };
    const similar = (a, b) => {
      if (a === b) return 1;
      const x = bigrams(a), y = bigrams(b);
      if (!x.length || !y.length) return 0;
      let common = 0; const pool = [...y];
      for (const g of x) { const i = pool.indexOf(g); if (i >= 0) { common++; pool.splice(i, 1); } }
      return (2 * common) / (x.length + y.length);
    };
    const scored = all.map((e) => ({ e, score: (e.role === identity.role ? 0.5 : 0) + 0.5 * similar(e.name, identity.name) }))
      .sort((a, b) => b.score - a.score);
    const candidates = scored.slice(0, 3).map(({ e, score }) => ({ role: e.role, name: e.name, score: Math.round(score * 100) / 100 }));
    let how = null, el = null;
    const nth = same[identity.nth || 0];
    // Recorded without stable attributes: role, name and position were all it had.
    if (!attrs.length && nth) { how = 'exact'; el = nth.el; }
    else if (exact && exact.length === 1 && exact[0].role === identity.role && exact[0].name === identity.name) { how = 'exact'; el = exact[0].el; }
    else if (same.length) { how = 'role_name'; el = (nth || same[0]).el; }
    else if (scored.length && scored[0].score >= 0.75) { how = 'nearest'; el = scored[0].e.el; }
    return { ref: el ? (refOf.get(el) ?? null) : null, how, candidates };
  }

  Object.defineProperty(window, '__wp', {
    value: Object.freeze({ snapshot, resolve, state, changed, leavingMs, find, readText, readable, shownHtml, hasText, aim, aimThrough, now, docId, identify, locate, personAt, personFocus, concealedReport }),
    enumerable: false,
  });
})();
