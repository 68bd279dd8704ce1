// The web UI's page: the thread tree on the side, the open thread in the
// middle. See docs/webui.md.
import { API } from './api.js';
import { ThreadView } from './thread.js';
import { MoveDialog } from './move.js';
import { SessionHeader } from './title.js';
import { h, shortID, time } from './render.js';

const $ = (id) => document.getElementById(id);

const api = new API(askToken);
// listed holds the threads of the list as the search box and Show
// archived select them (GET /v1/threads); threads holds those and the
// children of the open thread, which it shows even when the list leaves
// them out.
const listed = new Map(); // id → thread summary
const threads = new Map(); // id → thread summary
let current = null; // the open ThreadView
const header = new SessionHeader(api, { toast, updated });
const mover = new MoveDialog(api, {
  toast,
  moved,
  moving: (id, on) => current?.id === id && current.setMoving(on),
  lookupMoved: (id) => current?.id === id && current.lookupMoved(),
});

// askToken shows the token dialog and resolves to what the person typed.
function askToken(rejected) {
  const dialog = $('token-dialog');
  $('token-refused').hidden = !rejected;
  $('token-input').value = '';
  return new Promise((resolve) => {
    const form = $('token-form');
    const done = (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      if (!t) return;
      form.removeEventListener('submit', done);
      dialog.close();
      resolve(t);
    };
    form.addEventListener('submit', done);
    dialog.addEventListener('cancel', (ev) => ev.preventDefault(), { once: true });
    dialog.showModal();
    $('token-input').focus();
  });
}

/** toast shows a message for people (an error) for a while. */
export function toast(msg) {
  const t = $('toast');
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.hidden = true), 8000);
}

// listQuery is what the list shows: the words searched for, and whether
// archived sessions are shown too.
function listQuery() {
  return { q: $('thread-search').value.trim(), archived: $('show-archived').checked ? 'include' : '' };
}

let loads = 0; // the number of the last loadThreads begun

/**
 * loadThreads reads every page of the thread list as listQuery selects it,
 * and the children of the open thread that it leaves out, and redraws the
 * tree. Of loads that overlap only the last one counts.
 */
async function loadThreads() {
  const n = ++loads;
  const query = listQuery();
  try {
    const seen = await readAll(query);
    const known = new Map(seen);
    const kids = current?.status?.children || [];
    if (current && kids.some((id) => !known.has(id))) {
      for (const [id, t] of await readAll({ parent: current.id, archived: 'include' })) known.set(id, t);
    }
    if (n !== loads) return;
    listed.clear();
    for (const [id, t] of seen) listed.set(id, t);
    threads.clear();
    for (const [id, t] of known) threads.set(id, t);
    drawTree(query);
    current?.threadsChanged(threads);
  } catch (err) {
    if (n === loads) toast('Could not list the threads: ' + err.message);
  }
}

// readAll reads up to 20 pages of the threads opts selects.
async function readAll(opts) {
  let cursor = '';
  const seen = new Map();
  for (let page = 0; page < 20; page++) {
    const res = await api.listThreads(cursor, opts);
    for (const t of res.threads || []) seen.set(t.id, t);
    cursor = res.next_cursor;
    if (!cursor) break;
  }
  return seen;
}

let reloadTimer = null;
/** reloadThreads reloads the thread list soon, once for many calls. */
function reloadThreads() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(loadThreads, 150);
}

let searchTimer = null;
// searched reloads the list a moment after the person stopped typing.
function searched() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(loadThreads, 250);
}

/** updated shows a session's root thread t as a change answered (title, archived). */
function updated(t) {
  for (const m of [listed, threads]) {
    const old = m.get(t.id);
    if (old) m.set(t.id, Object.assign({}, old, { title: t.title || '', archived: !!t.archived }));
  }
  drawTree(listQuery());
  // Archived or back, or renamed out of (or into) the search: the list
  // may gain or lose it.
  reloadThreads();
}

/** threadUpdated handles a thread_updated event of the open thread. */
function threadUpdated(t) {
  header.updated(t);
  updated(t);
}

// showHeader draws the header of the open thread id from its state s.
function showHeader(id, s) {
  header.show(id, s, !!current?.moved);
}

// threadLabel names a thread in the tree: a session by its title (or
// when it was started, before it has one), a child by why it started.
function threadLabel(t) {
  if (!t.parent_id) {
    if (t.title) return [h('span', { class: 'title-text' }, t.title), h('span', { class: 'id' }, time(t.created, true), ' · ', shortID(t.id))];
    return ['Session ', time(t.created, true), h('span', { class: 'id' }, shortID(t.id))];
  }
  const why = t.origin_tool === 'spawn_thread' ? 'spawned' : `event of ${t.origin_tool || 'a tool'}`;
  return [why + ' ', time(t.created), h('span', { class: 'id' }, shortID(t.id))];
}

// drawTree redraws the thread tree: sessions newest first, children under
// their parent in creation order.
function drawTree(query = listQuery()) {
  const kids = new Map();
  const roots = [];
  for (const t of listed.values()) {
    if (t.parent_id && listed.has(t.parent_id)) {
      if (!kids.has(t.parent_id)) kids.set(t.parent_id, []);
      kids.get(t.parent_id).push(t);
    } else {
      roots.push(t);
    }
  }
  const item = (t) => {
    const closed = t.status === 'closed';
    const a = h('a', {
      href: '#/t/' + encodeURIComponent(t.id),
      'data-thread': t.id,
      'aria-current': current && current.id === t.id ? 'page' : null,
      class: [closed ? 'closed' : '', t.archived ? 'archived' : ''].join(' ').trim() || null,
    }, threadLabel(t), closed ? h('span', { class: 'badge' }, 'closed') : null, t.archived ? h('span', { class: 'badge' }, 'archived') : null);
    const ch = kids.get(t.id);
    return h('li', {}, a, ch ? h('ul', {}, ch.map(item)) : null);
  };
  const tree = $('thread-tree');
  tree.replaceChildren(...roots.reverse().map(item));
  const sessions = roots.length;
  const none = $('no-threads');
  none.hidden = sessions > 0;
  if (query.q) none.textContent = `No session matches “${query.q}”.`;
  else none.textContent = query.archived ? 'No threads yet.' : 'No threads yet (archived sessions are not listed).';
  const status = query.q ? (sessions === 1 ? '1 session matches.' : `${sessions} sessions match.`) : '';
  if ($('list-status').textContent !== status) $('list-status').textContent = status;
}

// route opens the thread the address names (#/t/ID).
function route() {
  const m = location.hash.match(/^#\/t\/(.+)$/);
  const id = m ? decodeURIComponent(m[1]) : '';
  if (current && current.id === id) return;
  current?.close();
  current = null;
  if (!id) {
    $('thread').hidden = true;
    $('empty').hidden = false;
    drawTree();
    return;
  }
  $('empty').hidden = true;
  $('thread').hidden = false;
  current = new ThreadView(api, id, { threads, reloadThreads, toast, canMove: () => mover.allowed, showHeader, threadUpdated });
  drawTree();
  setMenu(false);
  if (!threads.has(id)) reloadThreads();
}

async function newThread() {
  const btn = $('new-thread');
  btn.disabled = true;
  try {
    const res = await api.createThread();
    location.hash = '#/t/' + encodeURIComponent(res.id);
    reloadThreads();
    $('input').focus();
  } catch (err) {
    toast('Could not start a thread: ' + err.message);
  } finally {
    btn.disabled = false;
  }
}

// setMenu opens or closes the thread list on narrow screens.
function setMenu(open) {
  document.body.classList.toggle('menu-open', open);
  $('menu').setAttribute('aria-expanded', String(open));
  if (open) $('sidebar').querySelector('a, button')?.focus();
}

let closing = ''; // the thread the close dialog asks about

// closeThread asks whether to close the open thread; closeAnswered
// closes it (POST .../close) when the answer is yes.
function closeThread() {
  closing = current?.id || '';
  if (closing) $('close-dialog').showModal();
}

// closeAnswered handles a button of the close dialog, as it is pressed:
// the dialog's close event comes later, in a task of its own, and may
// come after the dialog was opened again.
async function closeAnswered(ev) {
  const id = closing;
  closing = '';
  if (ev.submitter?.value !== 'close' || !id || current?.id !== id) return;
  try {
    await api.close(id);
    current?.refreshStatus();
    reloadThreads();
  } catch (err) {
    toast('Could not close the thread: ' + err.message);
  }
}

// moved shows that the session of root thread id moved to the runtime at
// base URL to, and drops it from the thread list (this runtime forgot it).
function moved(id, to) {
  if (current?.id === id) current.movedAway(to, true);
  else toast(`Session ${shortID(id)} moved to ${to}.`);
  reloadThreads();
}

function init() {
  $('new-thread').addEventListener('click', newThread);
  $('close-thread').addEventListener('click', closeThread);
  $('close-dialog').querySelector('form').addEventListener('submit', closeAnswered);
  $('move-thread').addEventListener('click', () => mover.open(current?.id));
  $('compact-thread').addEventListener('click', () => current?.compactions.now());
  // The skip link moves the focus without touching the address, which
  // names the open thread: to the message box when a thread is open,
  // else to the button that starts one.
  document.querySelector('a.skip').addEventListener('click', (ev) => {
    ev.preventDefault();
    ($('thread').hidden ? $('new-thread') : $('input')).focus();
  });
  $('menu').addEventListener('click', () => setMenu(!document.body.classList.contains('menu-open')));
  $('refresh').addEventListener('click', loadThreads);
  $('thread-filter').addEventListener('submit', (ev) => {
    ev.preventDefault();
    clearTimeout(searchTimer);
    loadThreads();
  });
  $('thread-search').addEventListener('input', searched);
  $('show-archived').addEventListener('change', loadThreads);
  document.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape' && document.body.classList.contains('menu-open')) {
      setMenu(false);
      $('menu').focus();
    }
  });
  $('composer').addEventListener('submit', (ev) => {
    ev.preventDefault();
    current?.submit($('input'));
  });
  $('input').addEventListener('keydown', (ev) => {
    // Enter sends, Shift+Enter starts a new line.
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      $('composer').requestSubmit();
    }
  });
  window.addEventListener('hashchange', route);
  // Threads other clients started appear when the person comes back.
  window.addEventListener('focus', reloadThreads);
  route();
  loadThreads();
  // Whether this runtime, with this token, moves sessions.
  mover.probe().then(() => current?.threadsChanged(threads));
}

init();
