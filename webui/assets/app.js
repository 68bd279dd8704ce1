// The web UI's page: the thread tree on the side, the open thread in the
// middle. See docs/webui.md.
import { API } from './api.js';
import { ThreadView } from './thread.js';
import { MoveDialog } from './move.js';
import { h, shortID, time } from './render.js';

const $ = (id) => document.getElementById(id);

const api = new API(askToken);
const threads = new Map(); // id → thread summary from GET /v1/threads
let current = null; // the open ThreadView
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

/** loadThreads reads every page of the thread list and redraws the tree. */
async function loadThreads() {
  try {
    let cursor = '';
    const seen = new Map();
    for (let page = 0; page < 20; page++) {
      const res = await api.listThreads(cursor);
      for (const t of res.threads || []) seen.set(t.id, t);
      cursor = res.next_cursor;
      if (!cursor) break;
    }
    threads.clear();
    for (const [id, t] of seen) threads.set(id, t);
    drawTree();
    current?.threadsChanged(threads);
  } catch (err) {
    toast('Could not list the threads: ' + err.message);
  }
}
let reloadTimer = null;
/** reloadThreads reloads the thread list soon, once for many calls. */
function reloadThreads() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(loadThreads, 150);
}

// threadLabel names a thread in the tree.
function threadLabel(t) {
  if (!t.parent_id) return ['Session ', time(t.created, true)];
  const why = t.origin_tool === 'spawn_thread' ? 'spawned' : `event of ${t.origin_tool || 'a tool'}`;
  return [why + ' ', time(t.created)];
}

// drawTree redraws the thread tree: sessions newest first, children under
// their parent in creation order.
function drawTree() {
  const kids = new Map();
  const roots = [];
  for (const t of threads.values()) {
    if (t.parent_id && threads.has(t.parent_id)) {
      if (!kids.has(t.parent_id)) kids.set(t.parent_id, []);
      kids.get(t.parent_id).push(t);
    } else {
      roots.push(t);
    }
  }
  const item = (t) => {
    const a = h('a', {
      href: '#/t/' + encodeURIComponent(t.id),
      'data-thread': t.id,
      'aria-current': current && current.id === t.id ? 'page' : null,
      class: t.status === 'closed' ? 'closed' : null,
    }, threadLabel(t), h('span', { class: 'id' }, shortID(t.id)), t.status === 'closed' ? h('span', { class: 'badge' }, 'closed') : null);
    const ch = kids.get(t.id);
    return h('li', {}, a, ch ? h('ul', {}, ch.map(item)) : null);
  };
  const tree = $('thread-tree');
  tree.replaceChildren(...roots.reverse().map(item));
  $('no-threads').hidden = roots.length > 0;
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
  current = new ThreadView(api, id, { threads, reloadThreads, toast, canMove: () => mover.allowed });
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
