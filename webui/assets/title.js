// SessionHeader is the open thread's title in the thread header: a
// session's title (its own, or the one derived from its first message),
// renamed in place (Enter saves, Escape cancels), and the Archive action
// that takes a session out of the thread list and brings it back. See
// docs/webui.md.
import { h, shortID } from './render.js';

const $ = (id) => document.getElementById(id);

export class SessionHeader {
  /**
   * api is the client API; app.updated(thread) is told of a session the
   * header renamed or archived (the root thread, as GET /v1/threads lists
   * it); app.toast shows an error.
   */
  constructor(api, app) {
    this.api = api;
    this.app = app;
    this.id = '';
    this.thread = null; // the open thread's state, or null until read
    this.moved = false;
    this.busy = false;
    $('rename-thread').addEventListener('click', () => this.edit());
    $('title-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.save();
    });
    $('title-cancel').addEventListener('click', () => this.cancel());
    $('title-input').addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') {
        ev.preventDefault();
        ev.stopPropagation();
        this.cancel();
      }
    });
    $('archive-thread').addEventListener('click', () => this.toggleArchived());
  }

  /**
   * show draws the header of thread id from its state s (GET
   * /v1/threads/{id}, or a thread_updated event's thread merged into it;
   * null while unknown). moved is true once its session moved away.
   */
  show(id, s, moved = false) {
    if (id !== this.id) {
      this.stopEditing(false);
      $('title-status').textContent = '';
    }
    this.id = id;
    this.thread = s;
    this.moved = moved;
    const title = $('thread-title');
    title.title = id;
    const root = s && !s.parent_id;
    if (!s) title.replaceChildren('Thread ' + shortID(id));
    else if (!root) title.replaceChildren('Child thread ' + shortID(id));
    else {
      const text = h('span', { class: s.title ? 'title-text' : 'title-text untitled' }, s.title || 'Untitled session');
      if (s.archived) title.replaceChildren(text, h('span', { class: 'badge archived' }, 'archived'));
      else title.replaceChildren(text);
    }
    const offer = root && !moved;
    $('rename-thread').hidden = !offer || this.editing();
    $('archive-thread').hidden = !offer;
    $('archive-thread').textContent = s?.archived ? 'Unarchive' : 'Archive';
    if (!offer) this.stopEditing(false);
  }

  editing() { return !$('title-form').hidden; }

  // edit opens the title for editing, with the focus in it.
  edit() {
    if (!this.thread || this.thread.parent_id) return;
    const input = $('title-input');
    input.value = this.thread.title || '';
    $('title-error').hidden = true;
    $('title-form').hidden = false;
    $('thread-title').hidden = true;
    $('rename-thread').hidden = true;
    input.focus();
    input.select();
  }

  cancel() { this.stopEditing(true); }

  // stopEditing closes the editor; focus moves the focus back to Rename.
  stopEditing(focus) {
    if (!this.editing()) return;
    $('title-form').hidden = true;
    $('thread-title').hidden = false;
    $('rename-thread').hidden = !this.thread || !!this.thread.parent_id || this.moved;
    if (focus) $('rename-thread').focus();
  }

  // save sends the title typed (empty: back to the derived one).
  async save() {
    if (this.busy) return;
    const id = this.id;
    const title = $('title-input').value.trim();
    this.busy = true;
    $('title-save').disabled = true;
    try {
      const t = await this.api.update(id, { title });
      if (id !== this.id) return;
      this.applied(t);
      this.stopEditing(true);
      $('title-status').textContent = title ? 'Title saved.' : 'Title reset: it is taken from the first message.';
    } catch (err) {
      if (id !== this.id) return;
      const e = $('title-error');
      e.textContent = 'The title was not saved: ' + err.message;
      e.hidden = false;
      $('title-input').focus();
    } finally {
      this.busy = false;
      $('title-save').disabled = false;
    }
  }

  // toggleArchived archives the open session, or brings it back.
  async toggleArchived() {
    if (this.busy || !this.thread) return;
    const id = this.id;
    const archived = !this.thread.archived;
    this.busy = true;
    $('archive-thread').setAttribute('aria-disabled', 'true');
    try {
      const t = await this.api.update(id, { archived });
      if (id !== this.id) return;
      this.applied(t);
      $('title-status').textContent = archived
        ? 'Session archived: the thread list leaves it out unless Show archived is ticked.'
        : 'Session back from the archive.';
    } catch (err) {
      this.app.toast((archived ? 'Could not archive the session: ' : 'Could not bring the session back: ') + err.message);
    } finally {
      this.busy = false;
      $('archive-thread').removeAttribute('aria-disabled');
    }
  }

  // applied shows the root thread t a change answered with, and tells the
  // page.
  applied(t) {
    this.updated(t);
    this.app.updated(t);
  }

  /** updated merges a session's root thread t (a thread_updated event's) into the header's state. */
  updated(t) {
    if (!this.thread || t.id !== this.id) return;
    this.thread.title = t.title || '';
    this.thread.archived = !!t.archived;
    this.show(this.id, this.thread, this.moved);
  }
}
