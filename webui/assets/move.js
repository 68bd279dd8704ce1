// The "Move to…" dialog: moves the open session to another gorap runtime
// (POST /v1/threads/{id}/migrate, docs/webui.md). The destination is one
// of the runtime's remotes (GET /v1/remotes) or an address typed in; the
// destination's token, when one is typed, is sent with that one request
// and kept nowhere.
import { h } from './render.js';

const $ = (id) => document.getElementById(id);

// The value of the option that reveals the address field.
const OTHER = '';

export class MoveDialog {
  /**
   * app.moving(id, on) tells the session's view that a move starts or
   * failed; app.moved(id, to) shows a session that moved;
   * app.lookupMoved(id) finds out where one went; app.toast(msg) shows an
   * error.
   */
  constructor(api, app) {
    this.api = api;
    this.app = app;
    this.names = []; // the remotes' names
    this.allowed = true; // false when the runtime or the token moves no session
    this.busy = false;
    this.id = '';
    this.dialog = $('move-dialog');
    $('move-remote').addEventListener('change', () => this.showAddress());
    $('move-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.move();
    });
    $('move-cancel').addEventListener('click', () => this.dialog.close());
    // Escape does not close the dialog while the move runs: its outcome
    // is shown there.
    this.dialog.addEventListener('cancel', (ev) => {
      if (this.busy) ev.preventDefault();
    });
    this.dialog.addEventListener('close', () => {
      $('move-token').value = '';
    });
  }

  /**
   * probe reads the remotes and whether moving is allowed: a runtime that
   * answers 404 moves no session, 403 means the client token is bound to
   * one user (only the runtime's own token moves sessions).
   */
  async probe() {
    try {
      const res = await this.api.remotes();
      this.names = Array.isArray(res.remotes) ? res.remotes.map(String) : [];
      this.allowed = true;
    } catch (err) {
      if (err.status === 403 || err.status === 404) this.allowed = false;
    }
    return this.allowed;
  }

  /** open shows the dialog for the session of root thread id. */
  async open(id) {
    if (!id || this.busy || this.dialog.open) return;
    await this.probe();
    if (!this.allowed) {
      this.app.toast('This runtime does not move sessions with this client token; use the runtime\'s own token.');
      return;
    }
    this.id = id;
    const sel = $('move-remote');
    sel.replaceChildren(...this.names.map((n) => h('option', { value: n }, n)), h('option', { value: OTHER }, 'Another runtime…'));
    $('move-remote-field').hidden = this.names.length === 0;
    $('move-url').value = '';
    $('move-token').value = '';
    this.setError('');
    this.setBusy(false);
    this.showAddress();
    this.dialog.showModal();
    (this.names.length ? sel : $('move-url')).focus();
  }

  // showAddress shows the address field when no remote is chosen.
  showAddress() {
    const other = this.names.length === 0 || $('move-remote').value === OTHER;
    $('move-url-field').hidden = !other;
    $('move-url').required = other;
  }

  setError(msg) {
    $('move-error').textContent = msg;
    $('move-error').hidden = !msg;
  }

  // setBusy shows the move running: every control disabled, and why it
  // may take a while.
  setBusy(on) {
    this.busy = on;
    $('move-form').setAttribute('aria-busy', String(on));
    for (const el of $('move-form').querySelectorAll('button, input, select')) el.disabled = on;
    $('move-progress').textContent = on ? 'Moving… this waits for the tool servers that keep state for this session.' : '';
  }

  // firstField is the field to correct after a refusal.
  firstField() {
    return $('move-url-field').hidden ? $('move-remote') : $('move-url');
  }

  async move() {
    if (this.busy) return;
    const id = this.id;
    const other = !$('move-url-field').hidden;
    const to = other ? $('move-url').value.trim() : $('move-remote').value;
    if (!to) {
      this.setError('Give the address of the runtime to move the session to, such as https://agent.example.');
      this.firstField().focus();
      return;
    }
    this.setError('');
    this.setBusy(true);
    this.app.moving(id, true);
    try {
      const res = await this.api.move(id, to, $('move-token').value);
      this.setBusy(false);
      this.dialog.close();
      this.app.moved(id, res.moved_to);
    } catch (err) {
      this.setBusy(false);
      this.app.moving(id, false);
      if (err.moved) {
        // Another client moved it first.
        this.dialog.close();
        this.app.lookupMoved(id);
        return;
      }
      // A 502 is a move that failed on the way, and says so itself.
      const msg = err.status === 502 ? err.message : 'The session was not moved: ' + err.message;
      this.setError(msg.charAt(0).toUpperCase() + msg.slice(1));
      this.firstField().focus();
    }
  }
}
