// ThreadView shows one thread: its history, the text the model is
// streaming, tool calls and their results, and what waits for the person
// (user choices, OAuth links), from the history and the event stream.
import { h, json, resultBody, safeURL, segments, shortID, time, view } from './render.js';
import { UsageLine } from './usage.js';
import { Compactions } from './compact.js';
import { inputForm } from './inputs.js';

const $ = (id) => document.getElementById(id);

// The reserved tool name of subscription events injected inline (RAP SU-5).
const INJECTED = 'receive_event__injected';

// What the page says of each thread state the runtime reports (docs/api.md,
// thread states) while no completion runs; quiet and closed say nothing.
const STATE_WORDS = {
  waiting_tools: 'waiting for tools…',
  waiting_user: 'waiting for you',
  waiting_timer: 'asleep',
  waiting_children: 'waiting for child threads…',
  failed: 'stopped: the model failed',
  moving: 'moving…',
};

// How often a session's root thread reads its state again while it has
// open child threads: their completions add to the session's tokens
// without an event on the root's stream.
const SESSION_REFRESH = 5000;

export class ThreadView {
  constructor(api, id, app) {
    this.api = api;
    this.id = id;
    this.app = app;
    this.seen = new Set(); // thread_id:seq of the messages shown
    this.calls = new Map(); // call_id → the call's element
    this.streaming = null; // the bubble of the text being streamed
    this.status = null; // the thread's state (the thread event, GET /v1/threads/{id})
    this.statusTimer = null;
    this.sessionTimer = null;
    this.connects = 0;
    this.requeue = []; // queued messages put aside while a replay rebuilds the view
    this.answered = new Set(); // call ids of the choices answered here
    this.moved = ''; // the base URL of the runtime the session moved to
    this.moving = false; // a move of the session from this page runs
    this.held = []; // error events that arrived while it ran
    this.closed = false;
    this.usage = new UsageLine(); // the tokens the thread and its session used
    this.list = $('messages');
    this.compactions = new Compactions(this); // the dividers of its compactions, the Compact action

    this.list.replaceChildren(); // another thread's, queued messages included
    $('conn').dataset.mode = '';
    this.clear();
    this.app.showHeader(id, null);
    if (!$('moved-note').hidden) {
      // The previous thread's session had moved away.
      $('moved-note').hidden = true;
      $('composer').hidden = false;
    }
    $('move-thread').hidden = true; // until the thread is known to be a root
    this.compactions.show(false); // until the thread is known to be open
    this.setConn('connecting');

    this.stream = api.follow(id, {
      onOpen: (resuming) => this.opened(resuming),
      onDrop: (err) => this.setConn('reconnecting', err),
      onGone: (err) => {
        this.setConn('gone', err);
        this.app.toast(err.message);
      },
      onMoved: () => this.lookupMoved(),
      onEvent: (type, data) => this.event(type, data),
    });
  }

  close() {
    this.closed = true;
    this.stream.close();
    clearTimeout(this.statusTimer);
    clearTimeout(this.sessionTimer);
  }

  // lookupMoved asks where the thread's session went, after the runtime
  // answered a request for it with a redirect, and shows it.
  async lookupMoved() {
    this.stream.close();
    clearTimeout(this.statusTimer);
    clearTimeout(this.sessionTimer);
    try {
      const res = await this.api.movedTo(this.id);
      if (!this.closed) this.movedAway(res.moved_to, false);
    } catch (err) {
      if (this.closed) return;
      this.setConn('gone', err);
      this.app.toast('Could not read the thread: ' + err.message);
    }
  }

  // setMoving is told when a move of the session from this page starts
  // and when it failed. The runtime ends the event stream of a session
  // that moved with an error event saying so: while the move runs, error
  // events wait, to be dropped when it succeeds (the page says where the
  // session went) and shown when it failed.
  setMoving(on) {
    this.moving = on;
    if (on) return;
    for (const d of this.held.splice(0)) this.error(d);
  }

  // movedAway shows that the session moved to the runtime at base URL to,
  // with a link to the thread in that runtime's web UI, and takes no more
  // input here. focus moves the keyboard focus to the link.
  movedAway(to, focus) {
    this.stream.close();
    clearTimeout(this.statusTimer);
    clearTimeout(this.sessionTimer);
    this.moved = String(to || '');
    this.moving = false;
    this.held = [];
    const base = safeURL(this.moved, false).replace(/\/+$/, '');
    const link = base ? h('a', { href: base + '/#/t/' + encodeURIComponent(this.id), 'data-moved-to': base }, base) : this.moved;
    const note = $('moved-note');
    note.replaceChildren('This session moved to ', link, '. It goes on there; that runtime may ask for its own client token.');
    note.hidden = false;
    for (const el of ['composer', 'move-thread', 'close-thread', 'compact-thread']) $(el).hidden = true;
    this.app.showHeader(this.id, this.status); // no renaming or archiving here
    // What the thread waits for and shows live is the other runtime's now;
    // its history stays here to read.
    for (const box of ['choices', 'oauth', 'views', 'toolset-errors', 'thread-info']) $(box).replaceChildren();
    this.usage.clear();
    this.statusSig = null;
    this.setRunning(false);
    this.setConn('moved');
    if (focus && base) note.querySelector('a').focus();
  }

  // opened runs on every (re)connection of the event stream. A
  // connection without Last-Event-ID gets the whole state again (the
  // replay: the thread, its history, views, open choices and OAuth links,
  // the text streamed so far): what was shown is cleared first. A resumed
  // one gets only the events it missed.
  opened(resuming) {
    this.connects++;
    this.setConn('live');
    if (!resuming) this.clear();
  }

  // clear forgets everything shown for the thread, before a replay. The
  // messages sent but not saved yet are put back once it is done.
  clear() {
    this.requeue.push(...this.list.querySelectorAll(':scope > [data-queued]'));
    this.list.replaceChildren();
    this.seen.clear();
    this.calls.clear();
    this.streaming = null;
    this.statusSig = null;
    for (const box of ['choices', 'oauth', 'views', 'toolset-errors', 'thread-info']) $(box).replaceChildren();
    this.usage.clear();
    this.compactions.clear();
    this.setRunning(false);
  }

  // replayed runs at the replay_done marker: every later event is live.
  replayed(d) {
    $('conn').dataset.mode = d.mode || '';
    for (const li of this.requeue) {
      if (this.streaming) this.list.insertBefore(li, this.streaming);
      else this.list.append(li);
    }
    this.requeue = [];
    this.refreshStatus();
    this.compactions.replayed();
    this.scroll();
  }

  setConn(state, err) {
    const el = $('conn');
    el.dataset.state = state;
    el.dataset.connects = String(this.connects);
    el.textContent = { connecting: 'connecting…', live: 'live', reconnecting: 'reconnecting…', gone: 'no such thread', moved: 'moved away' }[state];
    if (err && err.message) el.title = err.message;
  }

  setRunning(on) {
    this.running = on;
    this.showState();
  }

  // showState shows where the thread stands: working while a completion
  // runs, else the state the runtime last said (thread, turn_ended).
  showState() {
    const el = $('thread-state');
    const state = this.running ? 'running' : this.state || '';
    el.textContent = this.running ? 'working…' : STATE_WORDS[state] || '';
    el.dataset.state = state;
    el.classList.toggle('busy', !!this.running);
  }

  // event handles one event of the stream (docs/api.md, event types).
  event(type, d) {
    switch (type) {
      case 'text_delta':
        this.delta(d.text || '');
        break;
      case 'message':
        this.message(d);
        this.refreshStatus();
        break;
      case 'turn_ended':
        this.state = d.state;
        this.showState();
        break;
      case 'thread':
        this.status = d;
        this.state = d.state;
        this.showState();
        this.usage.set(d);
        this.drawStatus();
        this.watchSession();
        break;
      case 'compacted':
        this.compactions.add(d);
        break;
      case 'usage':
        // One completion's tokens, sent once its turn is saved: a read of
        // the state after it has them in its sums.
        this.usageEvents = (this.usageEvents || 0) + 1;
        this.usage.add(d);
        break;
      case 'reset':
        this.clear();
        break;
      case 'replay_done':
        this.replayed(d);
        break;
      case 'status':
        this.setRunning(d.state === 'running');
        if (d.state === 'idle') this.dropStreaming();
        this.refreshStatus();
        break;
      case 'error':
        if (this.moving) this.held.push(d);
        else this.error(d);
        break;
      case 'toolsets':
        $('toolset-errors').replaceChildren(...(d.errors || []).map((e) => h('li', {}, e)));
        break;
      case 'view':
        this.view(d);
        break;
      case 'oauth':
        this.oauth(d);
        break;
      case 'user_choice':
        // A tool may ask again in the same call: an event is always news.
        this.answered.delete(d.call_id);
        this.choice(d);
        break;
      case 'choice_answered':
        this.answered.add(d.call_id);
        this.removeChoice(d.call_id);
        break;
      case 'user_input':
        this.answered.delete(d.call_id);
        this.input(d);
        break;
      case 'input_answered':
        this.answered.add(d.call_id);
        this.removeInput(d.call_id);
        break;
      case 'thread_spawned':
        this.spawned(d);
        break;
      case 'thread_closed':
        this.refreshStatus();
        this.app.reloadThreads();
        break;
      case 'thread_updated':
        this.app.threadUpdated(d); // title.js
        break;
      default:
        // tool_call and tool_result arrive in messages too.
        break;
    }
  }

  delta(text) {
    this.setRunning(true);
    if (!this.streaming) {
      this.streaming = h('li', { class: 'msg assistant streaming', 'aria-busy': 'true' }, h('div', { class: 'text' }));
      this.list.append(this.streaming);
    }
    this.streaming.firstChild.append(text);
    // The runtime announces what a completion answers (a message, a tool
    // result, an event) before the completion streams: the reply streams
    // in sight, under its cause.
    this.scroll();
  }

  dropStreaming() {
    this.streaming?.remove();
    this.streaming = null;
  }

  scroll() {
    const m = $('main');
    if (m.scrollHeight - m.scrollTop - m.clientHeight < 200) m.scrollTop = m.scrollHeight;
  }

  // message shows a saved message once, whether it came from the history
  // or the stream.
  message(m) {
    const key = m.thread_id + ':' + m.seq;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    const inherited = m.thread_id !== this.id;
    const target = inherited ? this.inheritedList() : this.list;
    if (!inherited && m.role === 'assistant') this.dropStreaming();
    const add = (el) => {
      if (!inherited && this.streaming) this.list.insertBefore(el, this.streaming);
      else target.append(el);
    };
    const meta = h('div', { class: 'meta' }, m.role === 'tool' ? 'tool' : m.role, ' · ', time(m.created));
    if (m.role === 'user' && !inherited) this.unqueue(m.text || '');
    if (m.role === 'user') {
      const note = (m.text || '').startsWith('[runtime]');
      add(h('li', { class: note ? 'msg note' : 'msg user', 'data-seq': m.seq }, meta, h('div', { class: 'text' }, m.text || '')));
    } else if (m.role === 'assistant') {
      const li = h('li', { class: 'msg assistant', 'data-seq': m.seq }, meta);
      if (m.text) li.append(h('div', { class: 'text' }, m.text));
      for (const c of m.tool_calls || []) li.append(this.callBlock(c));
      add(li);
    } else if (m.role === 'tool') {
      for (const r of m.tool_results || []) {
        const call = this.calls.get(r.call_id);
        if (call) {
          call.querySelector('.result').replaceWith(this.resultBlock(r));
          call.classList.remove('waiting');
          this.removeOAuth(r.call_id);
        } else {
          add(h('li', { class: 'msg tool', 'data-seq': m.seq }, meta, this.resultBlock(r)));
        }
      }
    }
    if (!inherited) this.compactions.saved(m.seq);
    this.scroll();
  }

  // inheritedList is where a child thread shows the history it inherited
  // from its parent, folded.
  inheritedList() {
    let box = this.list.querySelector('.inherited ol');
    if (!box) {
      const details = h('details', { class: 'inherited' }, h('summary', {}, 'Inherited from the parent thread'), h('ol', {}));
      this.list.prepend(h('li', { class: 'msg inherited-box' }, details));
      box = details.querySelector('ol');
    }
    return box;
  }

  callBlock(c) {
    let head;
    if (c.name === INJECTED) {
      const a = c.arguments || {};
      head = h('div', { class: 'call-head' }, h('span', { class: 'tool-name' }, 'event'), ' from ', h('code', {}, a.original_tool_name || 'a subscription'));
    } else {
      head = h('div', { class: 'call-head' }, h('span', { class: 'tool-name' }, c.name), ' ', h('code', { class: 'display' }, c.display || c.name));
    }
    const el = h('div', { class: 'call waiting', 'data-call': c.id }, head,
      h('details', { class: 'args' }, h('summary', {}, 'arguments'), json(c.arguments)),
      h('div', { class: 'result pending' }, 'waiting for the result…'));
    this.calls.set(c.id, el);
    return el;
  }

  resultBlock(r) {
    const shown = segments(r.display_as);
    const cls = ['result', r.is_error ? 'error' : '', r.subscription ? 'subscription' : ''].join(' ').trim();
    const el = h('div', { class: cls, 'data-result': r.call_id });
    if (r.subscription) el.append(h('div', { class: 'label' }, 'subscription started'));
    if (shown) {
      el.append(...shown);
      el.append(h('details', { class: 'model-text' }, h('summary', {}, 'what the model got'), resultBody(r)));
    } else {
      el.append(...resultBody(r));
    }
    return el;
  }

  error(d) {
    let retry = '';
    if (!d.final && d.retry_in_ms) retry = `Retrying in ${Math.ceil(d.retry_in_ms / 1000)} s` + (d.attempt ? ` (attempt ${d.attempt} of ${d.max_attempts}).` : '.');
    // The alert is inside the list item: a list holds only list items.
    const li = h('li', { class: 'msg error', 'data-final': d.final ? '1' : null },
      h('div', { role: 'alert' }, h('div', { class: 'meta' }, 'error'), h('div', { class: 'text' }, d.message || 'unknown error'), retry ? h('div', { class: 'retry' }, retry) : null));
    this.list.append(li);
    this.scroll();
  }

  view(d) {
    const box = $('views');
    const el = view(String(d.view_type || 'view'), d.content);
    const old = [...box.children].find((c) => c.dataset.view === String(d.view_type));
    if (old) old.replaceWith(el);
    else box.append(el);
  }

  oauth(d) {
    const url = safeURL(d.auth_url, false);
    if (!url) return;
    this.removeOAuth(d.call_id);
    $('oauth').append(h('div', { class: 'banner oauth', 'data-oauth': d.call_id },
      h('span', {}, `${d.name || 'A tool'} needs your authorization. `),
      h('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, 'Authorize ' + (d.name || 'the tool')),
      h('span', { class: 'host' }, ' (' + new URL(url).host + ')')));
  }

  removeOAuth(callID) {
    $('oauth').querySelector(`[data-oauth="${CSS.escape(callID)}"]`)?.remove();
  }

  // choice shows a user choice (RAP UC-1) as buttons; the default is
  // marked and focused first.
  choice(d) {
    if (this.answered.has(d.call_id)) return;
    if ($('choices').querySelector(`[data-choice="${CSS.escape(d.call_id)}"]`)) return;
    const buttons = (d.choices || []).map((label, i) => h('button', {
      type: 'button', class: i === d.default ? 'default' : null,
      onclick: () => this.answer(d.call_id, i, box),
    }, label, i === d.default ? h('span', { class: 'sr-only' }, ' (default)') : null));
    const box = h('fieldset', { class: 'choice', 'data-choice': d.call_id },
      h('legend', {}, (d.name || 'a tool') + ' asks'),
      h('p', { class: 'prompt' }, d.prompt || ''),
      h('div', { class: 'choice-buttons' }, buttons,
        h('button', { type: 'button', class: 'dismiss', onclick: () => this.answer(d.call_id, null, box) }, 'Dismiss')));
    $('choices').append(box);
    // The default choice takes the focus, so that Enter answers it, unless
    // the person is writing a message or answering another choice.
    const active = document.activeElement;
    const busy = (active === $('input') && $('input').value !== '') || active?.closest('.choice');
    // (A selector list matches in document order: ask for the default
    // first, and only without one for the first button.)
    if (!busy) (box.querySelector('button.default') || box.querySelector('button'))?.focus({ preventScroll: true });
  }

  async answer(callID, selected, box) {
    for (const b of box.querySelectorAll('button')) b.disabled = true;
    try {
      await this.api.answer(this.id, callID, selected);
      this.answered.add(callID);
      box.remove();
    } catch (err) {
      for (const b of box.querySelectorAll('button')) b.disabled = false;
      this.app.toast('Your answer was not delivered: ' + err.message);
    }
  }

  // input shows a user input (the user_input gorap extension) as a form;
  // its first field takes the focus unless the person is busy elsewhere.
  input(d) {
    if (this.answered.has(d.call_id)) return;
    if ($('choices').querySelector(`[data-input="${CSS.escape(d.call_id)}"]`)) return;
    const done = (form) => { this.answered.add(d.call_id); form.remove(); };
    const form = inputForm(d,
      async (values) => { await this.api.answerInput(this.id, d.call_id, values); done(form); },
      async () => { await this.api.answerInput(this.id, d.call_id, null); done(form); });
    $('choices').append(form);
    const active = document.activeElement;
    const busy = (active === $('input') && $('input').value !== '') || active?.closest('.choice');
    if (!busy) form.querySelector('input, select')?.focus({ preventScroll: true });
  }

  removeInput(callID) {
    $('choices').querySelector(`[data-input="${CSS.escape(callID)}"]`)?.remove();
  }

  removeChoice(callID) {
    $('choices').querySelector(`[data-choice="${CSS.escape(callID)}"]`)?.remove();
  }

  spawned(d) {
    const why = d.reason === 'subscription_event' ? `An event of ${d.origin_tool || 'a subscription'} is handled in child thread ` : 'Child thread started: ';
    this.list.append(h('li', { class: 'msg note spawned' }, why,
      h('a', { href: '#/t/' + encodeURIComponent(d.thread_id), 'data-child': d.thread_id }, shortID(d.thread_id))));
    this.scroll();
    this.app.reloadThreads();
    this.refreshStatus();
  }

  // refreshStatus reads the thread's state soon, once for many calls.
  refreshStatus() {
    clearTimeout(this.statusTimer);
    this.statusTimer = setTimeout(async () => {
      try {
        const seen = this.usageEvents;
        this.status = await this.api.thread(this.id);
        if (this.closed || this.moved) return;
        // A usage event that came while the state was read may not be in
        // its sums: keep the figures the event made, and read again.
        if (seen !== this.usageEvents) this.refreshStatus();
        else this.usage.set(this.status);
        this.state = this.status.state;
        this.showState();
        this.drawStatus();
        this.watchSession();
      } catch (err) {
        if (err.moved) this.lookupMoved();
        else this.app.toast('Could not read the thread: ' + err.message);
      }
    }, 150);
  }

  // watchSession reads the state again in a while, when the thread is a
  // session's root that used tokens and has open child threads, so that
  // the session's figure follows what its children use.
  watchSession() {
    clearTimeout(this.sessionTimer);
    const s = this.status;
    if (!s || s.parent_id || this.closed || this.moved || !this.usage.shown()) return;
    if (!(s.children || []).some((id) => this.app.threads.get(id)?.status !== 'closed')) return;
    this.sessionTimer = setTimeout(() => (document.hidden ? this.watchSession() : this.refreshStatus()), SESSION_REFRESH);
  }

  threadsChanged() {
    if (this.status && !this.moved) this.drawStatus();
  }

  // drawStatus shows where the thread stands: its parent, closed or not,
  // what it waits for (sleeps with their wake time, tool calls),
  // subscriptions with the child threads of their events, its children.
  drawStatus() {
    if (this.moved) return;
    const s = this.status;
    const threads = this.app.threads;
    const link = (id) => h('a', { href: '#/t/' + encodeURIComponent(id), 'data-thread-link': id }, shortID(id));
    this.app.showHeader(this.id, s); // title.js
    const info = [];
    if (s.parent_id) info.push(h('p', { class: 'parent' }, 'Child of ', link(s.parent_id)));
    if (s.status === 'closed') info.push(h('p', { class: 'closed-note' }, 'This thread is closed: it takes no more messages.'));
    for (const c of s.pending_calls || []) info.push(this.pendingLine(c));
    const children = s.children || [];
    const bySub = new Map();
    for (const id of children) {
      const origin = threads.get(id)?.origin_call_id;
      if (!origin) continue;
      if (!bySub.has(origin)) bySub.set(origin, []);
      bySub.get(origin).push(id);
    }
    for (const sub of s.subscriptions || []) {
      const kids = bySub.get(sub.call_id) || [];
      info.push(h('div', { class: 'subscription', 'data-subscription': sub.call_id },
        h('span', { class: 'label' }, `Subscription ${sub.tool_name}`), ' ', h('span', { class: 'badge' }, sub.state),
        kids.length ? h('span', {}, ' · events: ', kids.flatMap((id, i) => (i ? [', ', link(id)] : [link(id)]))) : ' · no event yet'));
    }
    const spawned = children.filter((id) => threads.get(id)?.origin_tool === 'spawn_thread' || !threads.get(id));
    if (spawned.length) info.push(h('p', { class: 'children' }, 'Child threads: ', spawned.flatMap((id, i) => (i ? [', ', link(id)] : [link(id)]))));
    // Redraw only what changed, so that a link with the keyboard focus
    // keeps it while the state is read again.
    const sig = JSON.stringify([s.parent_id, s.status, (s.pending_calls || []).map((c) => [c.call_id, c.state, c.deadline]),
      (s.subscriptions || []).map((x) => [x.call_id, x.state]), [...bySub], spawned]);
    if (sig !== this.statusSig) {
      this.statusSig = sig;
      $('thread-info').replaceChildren(...info);
    }
    $('composer').hidden = s.status === 'closed';
    $('close-thread').hidden = s.status === 'closed';
    this.compactions.show(s.status !== 'closed');
    // A session moves whole: from its root thread.
    $('move-thread').hidden = !!s.parent_id || !this.app.canMove();
    for (const c of s.choices || []) this.choice({ call_id: c.call_id, name: c.tool_name, prompt: c.prompt, choices: c.choices, default: c.default });
    for (const c of s.inputs || []) this.input({ call_id: c.call_id, name: c.tool_name, prompt: c.prompt, fields: c.fields });
    if (children.some((id) => !threads.has(id))) this.app.reloadThreads();
  }

  // pendingLine describes a pending call: a sleep with its wake time, or a
  // tool call still waiting for its result.
  pendingLine(c) {
    const a = c.arguments || {};
    if (c.tool_name === 'sleep' && typeof a.seconds === 'number') {
      const wake = new Date(new Date(c.created).getTime() + a.seconds * 1000);
      return h('p', { class: 'sleeping' }, '💤 Sleeping until ', time(wake.toISOString(), true), a.reason ? ` — ${a.reason}` : '');
    }
    if (c.tool_name === 'sleep_until') {
      return h('p', { class: 'sleeping' }, `💤 Sleeping until ${a.date || ''} ${a.time || ''} ${a.timezone || 'UTC'}`);
    }
    if (c.tool_name === 'sleep_until_event_or_input') {
      return h('p', { class: 'sleeping' }, '💤 Sleeping until the next message or event');
    }
    const due = c.deadline ? [' (times out at ', time(c.deadline), ')'] : [];
    return h('p', { class: 'waiting-call' }, `Waiting for ${c.tool_name} (${c.state})`, due);
  }

  // queued shows a message being sent, then accepted by the runtime (it
  // is in the thread's inbox), until it is saved in the history; a message
  // whose slice failed stays queued until the runtime retries it.
  queued(text) {
    const li = h('li', { class: 'msg user queued', 'data-queued': '' }, h('div', { class: 'meta' }, 'user · sending…'), h('div', { class: 'text' }, text));
    if (this.streaming) this.list.insertBefore(li, this.streaming);
    else this.list.append(li);
    this.scroll();
    return li;
  }

  // unqueue removes the queued copy of a message that was saved.
  unqueue(text) {
    const i = this.requeue.findIndex((li) => li.lastChild.textContent === text);
    if (i >= 0) {
      this.requeue.splice(i, 1);
      return;
    }
    const q = [...this.list.querySelectorAll(':scope > [data-queued]')].find((li) => li.lastChild.textContent === text);
    q?.remove();
  }

  async submit(input) {
    const text = input.value;
    if (!text.trim()) return;
    input.disabled = true;
    const li = this.queued(text);
    try {
      await this.api.send(this.id, text);
      input.value = '';
      li.firstChild.textContent = 'user · queued';
    } catch (err) {
      li.remove();
      this.app.toast('Your message was not sent: ' + err.message);
      if (err.moved) this.lookupMoved();
    } finally {
      input.disabled = false;
      // Back to the message box, unless something took the focus meanwhile
      // (a user choice that arrived).
      if (document.activeElement === document.body || document.activeElement === null) input.focus();
    }
  }
}
