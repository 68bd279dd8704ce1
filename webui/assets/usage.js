// The tokens a conversation cost, under the thread's title: a short line
// ("12.3k tokens in · 1.2k out", and on a session's root thread with child
// threads "session: 40.1k in · 3.0k out") that opens on the exact figures,
// cached and cache-write input included. The figures come from the
// thread's state (usage and session_usage of GET /v1/threads/{id}), and
// each completion's "usage" event adds to them until the state is read
// again. Hidden while there is no usage (a model that reports none).
//
// Next to it, on a session's root thread, the session's budget
// (session_budget of the state) and the budgets of the session's tools
// (budgets): what the session and each tool spent of its tokens and
// dollars, each spent budget marked "(over)" in words. Hidden when there
// is none; read again with the state, never from usage events.
import { h } from './render.js';

const $ = (id) => document.getElementById(id);

/** compact writes a token count briefly: 950, 12.3k, 4.5M. */
export function compact(n) {
  n = Number(n) || 0;
  if (n < 1000) return String(n);
  if (n < 999950) return (n / 1000).toFixed(1) + 'k';
  return (n / 1e6).toFixed(1) + 'M';
}

// exact writes a count in full, with thousands separators.
function exact(n) {
  return (Number(n) || 0).toLocaleString('en-US');
}

const FIELDS = ['input_tokens', 'cached_input_tokens', 'uncached_input_tokens', 'cache_write_input_tokens', 'output_tokens'];

// copy keeps the counts of a usage object of the API; null when there is
// none.
function copy(u) {
  if (!u || typeof u !== 'object') return null;
  return Object.fromEntries(FIELDS.map((k) => [k, Number(u[k]) || 0]));
}

// add returns the sum of a (or nothing) and b.
function add(a, b) {
  const out = a ? { ...a } : copy({});
  for (const k of FIELDS) out[k] += Number(b[k]) || 0;
  // A provider may report the uncached part alone through input and cached.
  if (!b.uncached_input_tokens) out.uncached_input_tokens = out.input_tokens - out.cached_input_tokens;
  return out;
}

// sep separates two parts of the line: a middle dot to the eye, a comma
// to a screen reader.
function sep() {
  return [h('span', { 'aria-hidden': 'true' }, ' · '), h('span', { class: 'sr-only' }, ', ')];
}

// detail says one usage in words, exactly.
function detail(u) {
  return `${exact(u.input_tokens)} input tokens (${exact(u.uncached_input_tokens)} uncached, ` +
    `${exact(u.cached_input_tokens)} read from the cache, ${exact(u.cache_write_input_tokens)} written to the cache), ` +
    `${exact(u.output_tokens)} output tokens`;
}

/** UsageLine draws the usage of the open thread in #usage. */
export class UsageLine {
  constructor() {
    this.clear();
  }

  /** clear hides the line and forgets the figures (another thread, a replay, a session moved away). */
  clear() {
    this.thread = null;
    this.session = null;
    this.root = false;
    this.children = 0;
    this.budgets = [];
    this.sessionBudget = null;
    this.draw();
    drawBudgets([], null);
  }

  /** set takes the figures from the thread's state. */
  set(s) {
    this.thread = copy(s.usage);
    this.session = copy(s.session_usage);
    this.root = !s.parent_id;
    this.children = (s.children || []).length;
    this.budgets = this.root && Array.isArray(s.budgets) ? s.budgets : [];
    this.sessionBudget = this.root && s.session_budget && typeof s.session_budget === 'object' ? s.session_budget : null;
    this.draw();
    drawBudgets(this.budgets, this.sessionBudget);
  }

  /** add counts one completion of the thread (a usage event): the session's figure too on a root. */
  add(u) {
    if (!u || typeof u !== 'object') return;
    this.thread = add(this.thread, u);
    if (this.root) this.session = add(this.session, u);
    this.draw();
  }

  /** shown reports whether the thread or its session used tokens. */
  shown() {
    return !!(this.thread || this.session);
  }

  draw() {
    const box = $('usage');
    const withSession = this.root && this.children > 0 && !!this.session;
    box.hidden = !this.thread && !withSession;
    if (box.hidden) {
      box.open = false;
      return;
    }
    const t = this.thread || copy({});
    const line = [h('span', { class: 'sr-only' }, 'Tokens used: '), `${compact(t.input_tokens)} tokens in`, sep(), `${compact(t.output_tokens)} out`];
    const more = [h('p', { 'data-usage': 'thread' }, 'This thread: ', detail(t), '.')];
    if (withSession) {
      const s = this.session;
      line.push(sep(), `session: ${compact(s.input_tokens)} in`, sep(), `${compact(s.output_tokens)} out`);
      more.push(h('p', { 'data-usage': 'session' }, 'The session (this thread and its child threads): ', detail(s), '.'));
    }
    $('usage-summary').replaceChildren(...line.flat());
    $('usage-detail').replaceChildren(...more);
  }
}

// usd writes an amount of dollars: cents when that is exact, else four
// decimals ($0.50, $0.0123).
function usd(x) {
  x = Number(x) || 0;
  const cents = Math.round(x * 100);
  return '$' + (Math.abs(x * 100 - cents) < 1e-9 ? (cents / 100).toFixed(2) : x.toFixed(4));
}

// budgetParts says what one tool, or the session, spent of each of its
// limits, and whether it spent one whole.
function budgetParts(b) {
  const parts = [];
  let over = false;
  const kind = (spent, limit, text) => {
    if (!(Number(limit) > 0)) return;
    const done = (Number(spent) || 0) >= Number(limit);
    over = over || done;
    parts.push(text + (done ? ' (over)' : ''));
  };
  kind(b.tokens_spent, b.tokens_limit, `${exact(b.tokens_spent)} of ${exact(b.tokens_limit)} tokens`);
  kind(b.usd_spent, b.usd_limit, `${usd(b.usd_spent)} of ${usd(b.usd_limit)}` +
    (b.unpriced ? ' (not counting a model without a known price)' : ''));
  return { parts, over };
}

// drawBudgets shows the session's budget and those of its tools in
// #budgets, or hides it when there are none.
function drawBudgets(budgets, session) {
  const box = $('budgets');
  if (!box) return;
  const rows = budgets.map((b) => ({ tool: String(b.tool || ''), ...budgetParts(b) })).filter((r) => r.parts.length > 0);
  const own = session ? budgetParts(session) : { parts: [] };
  const mine = own.parts.length > 0 ? own : null;
  box.hidden = rows.length === 0 && !mine;
  if (box.hidden) {
    box.open = false;
    $('budgets-summary').replaceChildren();
    $('budgets-detail').replaceChildren();
    return;
  }
  const over = rows.filter((r) => r.over).length + (mine && mine.over ? 1 : 0);
  const what = [];
  if (mine) what.push('this session');
  if (rows.length) what.push(rows.length === 1 ? '1 tool' : `${rows.length} tools`);
  $('budgets-summary').replaceChildren(`Budgets: ${what.join(' and ')}` + (over ? `, ${over} over budget` : ''));
  const items = rows.map((r) =>
    h('li', { 'data-budget': r.tool, class: r.over ? 'over' : null }, `${r.tool}: `, r.parts.join(', ')));
  if (mine) {
    items.unshift(h('li', { 'data-session-budget': '', class: mine.over ? 'over' : null }, 'This session: ', mine.parts.join(', ')));
  }
  $('budgets-detail').replaceChildren(h('ul', {}, items));
}
