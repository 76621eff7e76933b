// The loopbot console. Plain JavaScript, no build step. Every message arrives as HTML the
// server rendered and escaped; everything this script writes itself goes through
// textContent. Who the person is, the server decides from the credential the browser
// holds (GET /api/me says); the page never names anyone itself.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  let name = '';           // who the server says this person is
  let current = null;      // the thread shown, or null on the home page
  let source = null;       // the page's one EventSource
  let threads = new Map(); // id -> summary
  let streams = 0;         // counts connect() calls, so a stale retry knows it is stale
  let retryTimer = null;
  let retryDelay = 0;      // ms before the next attempt after the console refused the stream
  let missingSince = 0;    // when the console first said it did not know the thread shown
  const maxRetryDelay = 15000;
  // A console that restarted knows no thread until the bot re-sends the cards of the
  // unfinished runs, which it does as it starts; a thread still unknown after this long
  // was forgotten.
  const missingGrace = 60000;
  // Submissions keep their UUID until they succeed, so a double click or a retry is the
  // same delivery and the bot handles it once.
  const pending = new Map();

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    // crypto.randomUUID needs a secure context; a console on a LAN address may not be one.
    const b = crypto.getRandomValues(new Uint8Array(16));
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  async function post(url, key, body) {
    let id = pending.get(key);
    if (!id) {
      id = uuid();
      pending.set(key, id);
    }
    const res = await fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-Loopbot': '1' },
      body: JSON.stringify({ ...body, id }),
    });
    let data = {};
    try {
      data = await res.json();
    } catch {
      // An error page that is not JSON: the status says enough.
    }
    if (res.ok || res.status < 500) pending.delete(key);
    if (!res.ok) throw new Error(data.error || `${res.status} ${res.statusText}`);
    if (data.notice) toast(data.notice, 'notice');
    return data;
  }

  function toast(text, kind) {
    const el = document.createElement('div');
    el.className = `toast toast-${kind}`;
    el.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    const small = document.createElement('small');
    small.textContent = kind === 'error' ? 'Error' : 'Only you can see this';
    const p = document.createElement('p');
    p.textContent = text;
    el.append(small, p);
    el.addEventListener('click', () => el.remove());
    $('toasts').append(el);
    setTimeout(() => el.remove(), 10000);
  }

  function setConn(live) {
    const el = $('conn');
    el.textContent = live ? 'live' : 'reconnecting…';
    el.classList.toggle('live', live);
  }

  function renderThreads() {
    const list = [...threads.values()].sort((a, b) => (a.updated < b.updated ? 1 : -1));
    const items = list.map((t) => {
      const li = document.createElement('li');
      const a = document.createElement('a');
      a.href = `#/t/${encodeURIComponent(t.id)}`;
      a.textContent = t.title;
      if (t.id === current) a.setAttribute('aria-current', 'page');
      const s = document.createElement('small');
      s.textContent = t.status || '';
      li.append(a, s);
      return li;
    });
    $('threads').replaceChildren(...items);
    const t = current && threads.get(current);
    $('thread-title').textContent = t ? t.title : '';
  }

  function upsert(m) {
    if (m.thread !== current) return;
    const box = $('messages');
    const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    let el = [...box.children].find((c) => c.dataset.id === m.id);
    if (!el) {
      el = document.createElement('div');
      el.className = 'entry';
      el.dataset.id = m.id;
      el.dataset.pos = String(m.pos);
      // The answer being written, if any, stays last.
      const before = [...box.children].find((c) => Number(c.dataset.pos) > m.pos) || box.querySelector('.entry-live');
      box.insertBefore(el, before);
    }
    el.dataset.kind = m.kind;
    // A tool step the reader opened stays open when its card is edited.
    const opened = new Set([...el.querySelectorAll('details[data-step][open]')].map((d) => d.dataset.step));
    // Rendered by the server from an allowlist, with every text escaped.
    el.innerHTML = m.html;
    for (const d of el.querySelectorAll('details[data-step]')) {
      if (opened.has(d.dataset.step)) d.open = true;
    }
    localTimes(el);
    for (const [key, sel] of Object.entries(shortcuts)) {
      for (const b of el.querySelectorAll(sel)) {
        b.setAttribute('aria-keyshortcuts', key);
        b.title = `Shortcut: ${key}`;
      }
    }
    if (stick) box.scrollTop = box.scrollHeight;
  }

  // live shows the answer as the model writes it, below the thread's messages; an empty
  // html ends it (the answer arrives in its place, or the text was not the answer).
  function live(s) {
    if (s.thread !== current) return;
    const box = $('messages');
    const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    let el = box.querySelector('.entry-live');
    if (!s.html) {
      if (el) el.remove();
      return;
    }
    if (!el) {
      el = document.createElement('div');
      el.className = 'entry entry-live';
      el.dataset.kind = 'live';
      box.append(el);
    }
    // Rendered by the server from an allowlist, with every text escaped.
    el.innerHTML = s.html;
    localTimes(el);
    if (stick) box.scrollTop = box.scrollHeight;
  }

  // The server writes times in UTC; the reader sees them in their own zone.
  function localTimes(el) {
    for (const t of el.querySelectorAll('time[datetime]')) {
      const d = new Date(t.getAttribute('datetime'));
      if (Number.isNaN(d.getTime())) continue;
      t.textContent = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
      t.title = d.toLocaleString();
    }
  }

  // cardNotice shows the bot's answer to a click that changed nothing (who may decide, say)
  // on the card itself, where the person is looking; the card's next edit replaces it.
  function cardNotice(button, text) {
    const msg = button.closest('.msg');
    if (!msg) return;
    let p = msg.querySelector('.card-notice');
    if (!p) {
      p = document.createElement('p');
      p.className = 'card-notice';
      p.setAttribute('role', 'status');
      msg.append(p);
    }
    p.textContent = text;
    p.scrollIntoView({ block: 'nearest' });
  }

  function connect() {
    if (source) source.close();
    source = null;
    clearTimeout(retryTimer);
    retryTimer = null;
    const gen = ++streams;
    const q = new URLSearchParams();
    if (current) q.set('thread', current);
    const es = new EventSource(`/api/events?${q}`);
    source = es;
    const on = (type, f) => es.addEventListener(type, (e) => f(JSON.parse(e.data)));
    on('threads', (list) => {
      threads = new Map(list.map((t) => [t.id, t]));
      renderThreads();
    });
    on('thread', (t) => {
      threads.set(t.id, t);
      renderThreads();
    });
    on('thread-gone', (t) => {
      threads.delete(t.id);
      renderThreads();
    });
    on('reset', () => $('messages').replaceChildren());
    on('message', upsert);
    on('stream', live);
    on('notice', (n) => toast(n.text, 'notice'));
    on('sync', () => {
      setConn(true);
      retryDelay = 0;
      missingSince = 0;
      $('gone').hidden = true;
    });
    es.onerror = () => {
      setConn(false);
      // The browser reconnects by itself after a dropped connection, but not after an
      // answer other than a stream: a 404 for a thread that a restarted console does not
      // know yet, a 503 while it shuts down. Those are retried here, with backoff.
      if (es.readyState === EventSource.CLOSED && gen === streams) retry(gen);
    };
  }

  async function retry(gen) {
    const thread = current;
    if (thread) {
      // EventSource does not tell why it was refused; the thread's own URL does.
      let status = 0;
      try {
        const res = await fetch(`/api/threads/${encodeURIComponent(thread)}`, { credentials: 'same-origin' });
        status = res.status;
      } catch {
        // The console is down again: retry as for any other refusal.
      }
      if (gen !== streams) return;
      if (status === 404) {
        if (!missingSince) missingSince = Date.now();
        if (Date.now() - missingSince > missingGrace) {
          $('gone').hidden = false;
          return;
        }
      }
    }
    retryDelay = Math.min(maxRetryDelay, retryDelay ? retryDelay * 2 : 500);
    retryTimer = setTimeout(() => {
      if (gen === streams) connect();
    }, retryDelay);
  }

  function route() {
    const m = location.hash.match(/^#\/t\/([A-Za-z0-9_-]{1,64})$/);
    current = m ? m[1] : null;
    $('home').hidden = current !== null;
    $('thread').hidden = current === null;
    $('gone').hidden = true;
    retryDelay = 0;
    missingSince = 0;
    $('messages').replaceChildren();
    renderThreads();
    connect();
    (current ? $('reply') : $('goal')).focus();
  }

  async function whoAmI() {
    try {
      const res = await fetch('/api/me', { credentials: 'same-origin' });
      if (res.ok) name = (await res.json()).name || '';
    } catch {
      // The console is down: the stream's retries show it; the name comes next time.
    }
    $('who').textContent = name ? `You are ${name}` : '';
  }

  async function submit(form, button, field, send) {
    const text = field.value.trim();
    if (!text) return;
    button.disabled = true;
    try {
      await send(text);
      field.value = '';
    } catch (err) {
      toast(err.message, 'error');
    } finally {
      button.disabled = false;
    }
  }

  $('goal-form').addEventListener('submit', (e) => {
    e.preventDefault();
    submit($('goal-form'), $('goal-submit'), $('goal'), async (text) => {
      const d = await post('/api/threads', `goal\n${text}`, { text });
      location.hash = `#/t/${d.thread}`;
    });
  });

  $('reply-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = current;
    submit($('reply-form'), $('reply-submit'), $('reply'), (text) =>
      post(`/api/threads/${encodeURIComponent(id)}/messages`, `reply\n${id}\n${text}`, { text }));
  });

  for (const [field, form] of [['goal', 'goal-form'], ['reply', 'reply-form']]) {
    $(field).addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $(form).requestSubmit();
    });
  }

  $('messages').addEventListener('click', async (e) => {
    const b = e.target.closest('button[data-action]');
    if (!b || b.disabled) return;
    if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return;
    const card = b.closest('.buttons');
    const all = card ? [...card.querySelectorAll('button')] : [b];
    all.forEach((x) => { x.disabled = true; });
    try {
      // A button that asks for a reason sends what its card's reason field holds.
      const field = b.dataset.reason ? b.closest('article')?.querySelector('input.reason') : null;
      const text = field ? field.value.trim() : '';
      const d = await post('/api/actions', `action\n${b.dataset.action}\n${text}`, text ? { action: b.dataset.action, thread: current, text } : { action: b.dataset.action, thread: current });
      // A notice means the click changed nothing (not allowed, say): the card stays as it
      // was, so its buttons must work again. A click that did change the card gets it
      // re-rendered, buttons and all.
      if (d.notice) {
        all.forEach((x) => { x.disabled = false; });
        cardNotice(b, d.notice);
      }
    } catch (err) {
      toast(err.message, 'error');
      all.forEach((x) => { x.disabled = false; });
    }
  });

  // Keyboard: "a" approves and "r" rejects, when no text box has the focus: the call of the
  // approval card the focus is in (tabbed to its buttons, say), else the thread's latest
  // pending call. It is the same click as the mouse's, confirmation and all. "r" is the
  // card's first danger button, Reject, never Reject and stop after it.
  const shortcuts = {
    a: '.msg-approval button.btn-primary',
    r: '.msg-approval button.btn-danger:not(.btn-danger ~ .btn-danger)',
  };
  document.addEventListener('keydown', (e) => {
    if (!current || e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const sel = shortcuts[e.key];
    if (!sel) return;
    const live = (root) => [...root.querySelectorAll(sel)].filter((b) => !b.disabled);
    const card = t && t.closest ? t.closest('#messages .msg-approval') : null;
    const buttons = (card && live(card).length ? live(card) : live($('messages')));
    const b = buttons[buttons.length - 1];
    if (!b) return;
    e.preventDefault();
    b.click();
  });

  window.addEventListener('hashchange', route);

  whoAmI();
  route();
})();
