// The client API (docs/api.md) as seen from the browser: JSON requests
// and the Server-Sent Events stream of a thread.
//
// The stream is read with fetch rather than EventSource so that the client
// token travels in the Authorization header (never in a URL) and so that a
// reconnection can send Last-Event-ID itself.

const TOKEN_KEY = 'gorap.clientToken';

/** An answer of the API outside 2xx, with the runtime's message. */
export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
    // moved: the session moved to another runtime (the runtime answered
    // 308; GET /v1/moved/{id} says where).
    this.moved = status === 308;
  }
}

// Requests never follow a redirect: the runtime redirects only the
// requests of a session that moved to another runtime, whose API is
// another origin wanting its own token. The answer is then an opaque
// redirect, reported as a moved session.
const MOVED = 'this session moved to another runtime';

/**
 * The client API of the runtime that served this page.
 * askToken is called when the runtime answers 401: it resolves to the
 * token the person typed (kept in sessionStorage for this tab only).
 */
export class API {
  constructor(askToken) {
    this.askToken = askToken;
    this.asking = null;
  }

  token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  headers(extra) {
    const h = Object.assign({ Accept: 'application/json' }, extra);
    const t = this.token();
    if (t) h.Authorization = 'Bearer ' + t;
    return h;
  }

  // needToken asks for a token once, however many requests were refused;
  // sent is the token the refused request carried. A request sent before
  // the person gave a token, and refused after, is sent again with it
  // without asking twice.
  async needToken(sent) {
    if (!this.asking && sent !== this.token()) return;
    const rejected = sent !== '';
    if (!this.asking) {
      this.asking = this.askToken(rejected).then((t) => {
        sessionStorage.setItem(TOKEN_KEY, t);
        this.asking = null;
      });
    }
    return this.asking;
  }

  /** Sends one JSON request; resolves to the decoded answer. */
  async request(method, path, body) {
    for (;;) {
      const init = { method, headers: this.headers(), redirect: 'manual' };
      if (method !== 'GET' && method !== 'HEAD') {
        // The runtime refuses a state-changing request that does not say
        // JSON, bodyless ones included: a web page could send it.
        init.headers['Content-Type'] = 'application/json';
      }
      if (body !== undefined) init.body = JSON.stringify(body);
      const sent = this.token();
      const resp = await fetch(path, init);
      if (resp.type === 'opaqueredirect') throw new APIError(308, MOVED);
      if (resp.status === 401) {
        await this.needToken(sent);
        continue;
      }
      const data = await resp.json().catch(() => ({}));
      if (!resp.ok) {
        throw new APIError(resp.status, data.error || `${method} ${path}: HTTP ${resp.status}`);
      }
      return data;
    }
  }

  createThread() { return this.request('POST', '/v1/threads', {}); }
  /**
   * listThreads reads a page of the thread list after cursor; opts may
   * name a search (q: words of titles and first messages), what to do
   * with archived sessions (archived: exclude, the runtime's default,
   * include or only) and a parent whose children alone to list.
   */
  listThreads(cursor, opts = {}) {
    const q = new URLSearchParams({ limit: '1000' });
    if (cursor) q.set('cursor', cursor);
    if (opts.q) q.set('q', opts.q);
    if (opts.archived) q.set('archived', opts.archived);
    if (opts.parent) q.set('parent_id', opts.parent);
    return this.request('GET', '/v1/threads?' + q);
  }
  /** update renames ({title}) or archives ({archived}) a session; resolves to its root thread. */
  update(id, changes) { return this.request('PATCH', '/v1/threads/' + encodeURIComponent(id), changes); }
  thread(id) { return this.request('GET', '/v1/threads/' + encodeURIComponent(id)); }
  send(id, text) { return this.request('POST', '/v1/threads/' + encodeURIComponent(id) + '/messages', { text }); }
  /** history reads a thread's messages and its compactions. */
  history(id) { return this.request('GET', '/v1/threads/' + encodeURIComponent(id) + '/messages'); }
  /** compact compacts a thread's history now; resolves to the compaction. */
  compact(id) { return this.request('POST', '/v1/threads/' + encodeURIComponent(id) + '/compact', {}); }
  close(id) { return this.request('POST', '/v1/threads/' + encodeURIComponent(id) + '/close'); }
  /** remotes lists the runtimes sessions may move to by name. */
  remotes() { return this.request('GET', '/v1/remotes'); }
  /** move moves the session of root thread id to another runtime. */
  move(id, to, token) {
    const body = { to };
    if (token) body.token = token;
    return this.request('POST', '/v1/threads/' + encodeURIComponent(id) + '/migrate', body);
  }
  /** movedTo says where the session of thread id went (404: it did not move). */
  movedTo(id) { return this.request('GET', '/v1/moved/' + encodeURIComponent(id)); }
  /** answerInput answers a user input with values, or dismisses it (null). */
  answerInput(id, callID, values) {
    const body = values === null ? { dismiss: true } : { values };
    return this.request('POST', `/v1/threads/${encodeURIComponent(id)}/inputs/${encodeURIComponent(callID)}`, body);
  }
  answer(id, callID, selected) {
    const body = selected === null ? { dismiss: true } : { selected };
    return this.request('POST', `/v1/threads/${encodeURIComponent(id)}/choices/${encodeURIComponent(callID)}`, body);
  }

  /**
   * Follows a thread's event stream, reconnecting when it drops.
   * handlers: onEvent(type, data, id), onOpen(resuming), onDrop(error),
   * onGone(error) when the runtime does not know the thread (no retry),
   * onMoved(error) when its session moved to another runtime (no retry).
   * resuming is true when the connection asked the runtime to resume after
   * the last event id seen (Last-Event-ID).
   * Returns an object whose close() ends the stream for good.
   */
  follow(id, handlers) {
    return new EventStream(this, '/v1/threads/' + encodeURIComponent(id) + '/events', handlers);
  }
}

/** One followed event stream (see API.follow). */
class EventStream {
  constructor(api, path, handlers) {
    this.api = api;
    this.path = path;
    this.handlers = handlers;
    this.lastID = '';
    this.closed = false;
    this.abort = null;
    this.run();
  }

  close() {
    this.closed = true;
    if (this.abort) this.abort.abort();
  }

  async run() {
    let backoff = 250;
    while (!this.closed) {
      let wait = backoff;
      try {
        const opened = await this.connect();
        if (opened) backoff = 250;
      } catch (err) {
        if (this.closed) return;
        if (err && err.moved) {
          this.closed = true;
          this.handlers.onMoved?.(err);
          return;
        }
        if (err && (err.status === 404 || err.status === 400)) {
          // No such thread: reconnecting will not help.
          this.closed = true;
          this.handlers.onGone?.(err);
          return;
        }
        if (err && err.retryAfter) wait = err.retryAfter * 1000;
        this.handlers.onDrop?.(err);
      }
      if (this.closed) return;
      await new Promise((r) => setTimeout(r, wait));
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  // connect reads the stream until it ends; it resolves to whether the
  // runtime accepted the connection.
  async connect() {
    this.abort = new AbortController();
    const resuming = this.lastID !== '';
    const headers = this.api.headers({ Accept: 'text/event-stream' });
    if (resuming) headers['Last-Event-ID'] = this.lastID;
    const sent = this.api.token();
    const resp = await fetch(this.path, { headers, signal: this.abort.signal, cache: 'no-store', redirect: 'manual' });
    if (resp.type === 'opaqueredirect') throw new APIError(308, MOVED);
    if (resp.status === 401) {
      await this.api.needToken(sent);
      return false;
    }
    if (!resp.ok) {
      const data = await resp.json().catch(() => ({}));
      const err = new APIError(resp.status, data.error || `event stream: HTTP ${resp.status}`);
      err.retryAfter = Number(resp.headers.get('Retry-After')) || 0;
      throw err;
    }
    this.handlers.onOpen?.(resuming);
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let ev = { type: '', data: [], id: null };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        ev = this.line(line, ev);
      }
    }
    if (!this.closed) this.handlers.onDrop?.(null);
    return true;
  }

  // line handles one line of the stream (the SSE format of the HTML
  // standard) and returns the event being built.
  line(line, ev) {
    if (line === '') {
      if (ev.id !== null) this.lastID = ev.id;
      if (ev.data.length > 0) {
        let data = null;
        try {
          data = JSON.parse(ev.data.join('\n'));
        } catch {
          data = ev.data.join('\n');
        }
        this.handlers.onEvent(ev.type || 'message', data, this.lastID);
      }
      return { type: '', data: [], id: null };
    }
    if (line.startsWith(':')) return ev; // a comment: keep-alive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') ev.type = value;
    else if (field === 'data') ev.data.push(value);
    else if (field === 'id' && !value.includes('\0')) ev.id = value;
    return ev;
  }
}
