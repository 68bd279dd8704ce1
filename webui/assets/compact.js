// Compaction in the conversation (docs/threads.md): when the runtime has
// summarised a thread's older messages, the model sees the summary instead
// of them, while the page still shows them all. A divider right after the
// last message a summary covers says so, with the summary folded in it;
// the "Compact" action of the thread's header asks for a compaction now
// (POST /v1/threads/{id}/compact). The compactions come from the history
// (GET /v1/threads/{id}/messages) after each replay, and from the
// "compacted" event live.
import { h, time } from './render.js';

const $ = (id) => document.getElementById(id);

// PROGRESS is what the status region says while the model writes a
// summary asked for from the page.
const PROGRESS = 'Compacting… the model is writing a summary';

/** dividerText says what a compaction of n messages means. */
export function dividerText(n) {
  n = Number(n) || 0;
  return `Compacted ${n} earlier message${n === 1 ? '' : 's'} — the model sees a summary from here`;
}

/** Compactions draws one thread's compactions in its message list. */
export class Compactions {
  /**
   * view is the thread's ThreadView: its api, id, list (the messages'
   * <ol>), closed and moved, lookupMoved().
   */
  constructor(view) {
    this.view = view;
    this.known = new Map(); // upto_seq → compaction
    this.replaying = true; // the list is being rebuilt: draw nothing yet
    this.busy = false; // a compaction asked for from the page runs
    this.status(''); // another thread's outcome
    $('compact-thread').removeAttribute('aria-disabled');
  }

  /** clear is called when the list is emptied before a replay. */
  clear() {
    this.replaying = true;
  }

  /**
   * replayed is called at the replay's end: every message is shown, so
   * the compactions known are drawn, then read again from the history
   * (events missed while the page was away are not replayed).
   */
  async replayed() {
    if (!this.replaying) return; // a resume: the events missed came
    this.replaying = false;
    this.arrange();
    try {
      const res = await this.view.api.history(this.view.id);
      if (this.view.closed) return;
      for (const c of res.compactions || []) this.add(c);
    } catch (err) {
      if (this.view.closed) return;
      if (err.moved) this.view.lookupMoved();
      // Otherwise the dividers are missing until the next replay; the
      // conversation itself is whole.
    }
  }

  /** add records a compaction (from the history, an event or an answer) and draws it. */
  add(c) {
    const upto = Number(c && c.upto_seq);
    if (!Number.isFinite(upto) || upto <= 0) return null;
    this.known.set(upto, c);
    return this.arrange();
  }

  /**
   * saved is called after a message of the thread was drawn: a divider
   * drawn before that message arrived (the history was read before its
   * event came) moves after it.
   */
  saved(seq) {
    for (const upto of this.known.keys()) {
      if (upto >= seq) {
        this.arrange();
        return;
      }
    }
  }

  // arrange puts each known compaction's divider right after the last
  // message it covers, oldest first; it returns the divider of the latest
  // compaction added.
  arrange() {
    if (this.replaying) return null;
    const list = this.view.list;
    const items = [...list.children].filter((li) => li.dataset.seq !== undefined && !li.dataset.compaction);
    let last = null;
    for (const upto of [...this.known.keys()].sort((a, b) => a - b)) {
      const c = this.known.get(upto);
      let el = list.querySelector(`:scope > [data-compaction="${upto}"]`);
      if (!el) el = this.divider(c);
      // The last message the summary covers, or a message it covers that
      // holds results saved later (a call and its result are drawn
      // together).
      let anchor = null;
      for (const li of items) if (Number(li.dataset.seq) <= upto) anchor = li;
      // Dividers of the same anchor stay in order of their upto_seq.
      let after = anchor || list.querySelector(':scope > .inherited-box');
      while (after && after.nextElementSibling?.dataset.compaction && Number(after.nextElementSibling.dataset.compaction) < upto) {
        after = after.nextElementSibling;
      }
      if (after) {
        if (after.nextElementSibling !== el) after.after(el);
      } else if (list.firstElementChild !== el) {
        list.prepend(el);
      }
      last = el;
    }
    return last;
  }

  // divider builds the line that stands after the messages a compaction
  // covers: a disclosure whose summary says what happened, opening on
  // the summary the model reads instead.
  divider(c) {
    return h('li', { class: 'compaction', 'data-compaction': String(c.upto_seq) },
      h('details', {},
        h('summary', {}, h('span', { class: 'rule', 'aria-hidden': 'true' }), h('span', { class: 'label' }, dividerText(c.messages)),
          h('span', { class: 'rule', 'aria-hidden': 'true' })),
        h('div', { class: 'compaction-body' },
          h('p', { class: 'meta' }, 'What the model reads instead of them', c.created ? [' (written ', time(c.created, true), ')'] : '', ':'),
          h('div', { class: 'text' }, String(c.summary || '')))));
  }

  /** show hides the Compact action on a thread that takes no messages. */
  show(on) {
    $('compact-thread').hidden = !on;
  }

  // status says the outcome of a compaction asked for from the page, in
  // the header's polite status region.
  status(text, error) {
    const el = $('compact-status');
    el.textContent = text;
    el.classList.toggle('error', !!error);
  }

  /**
   * now compacts the thread (the Compact action): it says that the model
   * is writing, then draws the new divider and says what was compacted,
   * or says why nothing was.
   */
  async now() {
    if (this.busy || this.view.closed || this.view.moved) return;
    const btn = $('compact-thread');
    this.busy = true;
    // aria-disabled rather than disabled: the button keeps the keyboard
    // focus while the model writes.
    btn.setAttribute('aria-disabled', 'true');
    this.status(PROGRESS);
    try {
      const c = await this.view.api.compact(this.view.id);
      if (this.view.closed) return;
      const el = this.add(c);
      const n = Number(c.messages) || 0;
      this.status(`Compacted ${n} earlier message${n === 1 ? '' : 's'}: the model now sees a summary of them. Every message stays here.`);
      el?.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      if (this.view.closed) return;
      // The runtime's reason, without its class ("bad input: "), which
      // says nothing to a person.
      this.status('Not compacted: ' + String(err.message || err).replace(/^bad input: /, ''), true);
      if (err.moved) this.view.lookupMoved();
    } finally {
      this.busy = false;
      // Another thread's view may own the button by now.
      if (!this.view.closed) btn.removeAttribute('aria-disabled');
    }
  }
}
