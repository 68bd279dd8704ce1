// DOM building for the web UI. Everything a model, a tool or a person
// wrote is set with textContent (never parsed as HTML), links only as http(s)
// and images only as data: URLs of raster types or https URLs.

/** h builds an element: h('p', {class: 'x'}, 'text', child, …). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** safeURL returns u when it is an absolute http(s) URL, else ''. */
export function safeURL(u, httpsOnly) {
  try {
    const url = new URL(String(u));
    if (url.protocol === 'https:' || (!httpsOnly && url.protocol === 'http:')) return url.href;
  } catch {
    // not a URL
  }
  return '';
}

const imageTypes = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
const base64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * image renders an image given as base64 data and a media type (RAP RE-2,
 * RE-3), or as an https URL; anything else is described in words.
 */
export function image(data, mediaType, url, alt) {
  let src = '';
  if (typeof data === 'string' && imageTypes.has(mediaType) && base64.test(data.replace(/\s/g, ''))) {
    src = `data:${mediaType};base64,${data.replace(/\s/g, '')}`;
  } else if (url) {
    src = safeURL(url, true);
  }
  if (!src) return h('p', { class: 'note' }, `(an image of type ${mediaType || 'unknown'} that this page does not show)`);
  return h('img', { class: 'result-image', src, alt: alt || 'image from the tool', loading: 'lazy' });
}

/** diff renders a unified diff with its path (RAP RE-3 diff segments). */
export function diff(content) {
  const path = content && typeof content.path === 'string' ? content.path : '';
  const patch = content && typeof content.patch === 'string' ? content.patch : '';
  const lines = patch.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const pre = h('pre', { class: 'diff', tabindex: 0, 'aria-label': 'diff of ' + (path || 'a file') });
  for (const l of lines) {
    let cls = 'ctx';
    if (l.startsWith('+++') || l.startsWith('---')) cls = 'file';
    else if (l.startsWith('+')) cls = 'add';
    else if (l.startsWith('-')) cls = 'del';
    else if (l.startsWith('@@')) cls = 'hunk';
    pre.append(h('span', { class: cls }, l), '\n');
  }
  return h('figure', { class: 'diff-block' }, path ? h('figcaption', {}, path) : null, pre);
}

/**
 * segments renders display_as segments (RAP RE-3): each segment of a type
 * this page knows (text, diff, image); unknown types are skipped. It
 * returns null when none was rendered, so the caller falls back to the
 * result's text.
 */
export function segments(list) {
  if (!Array.isArray(list)) return null;
  const out = [];
  for (const s of list) {
    if (!s || typeof s !== 'object') continue;
    const c = s.content;
    if (s.type === 'text' && typeof c === 'string') out.push(h('div', { class: 'text' }, c));
    else if (s.type === 'diff' && c && typeof c === 'object') out.push(diff(c));
    else if (s.type === 'image' && c && typeof c === 'object') out.push(image(c.data, c.mediaType || c.media_type, c.url));
  }
  return out.length ? out : null;
}

/** resultBody renders what the model got: text, or content items (RAP RE-2). */
export function resultBody(r) {
  if (Array.isArray(r.content) && r.content.length) {
    return r.content.map((item) => {
      if (item && item.type === 'image') return image(item.data, item.mediaType, '', 'image result');
      return h('div', { class: 'text' }, item && typeof item.text === 'string' ? item.text : '');
    });
  }
  return [h('div', { class: 'text' }, r.text || '')];
}

/** json renders a value as indented JSON text. */
export function json(v) {
  let s;
  try {
    s = JSON.stringify(v, null, 2);
  } catch {
    s = String(v);
  }
  return h('pre', { class: 'json' }, s === undefined ? '' : s);
}

/** shortID shortens a thread or call id for people. */
export function shortID(id) {
  const s = String(id || '');
  return s.length > 13 ? s.slice(0, 8) + '…' + s.slice(-4) : s;
}

/** time renders a timestamp as local time, with the full value as title. */
export function time(ts, withDate) {
  const d = new Date(ts);
  if (isNaN(d)) return h('span', {}, String(ts || ''));
  const text = withDate ? d.toLocaleString() : d.toLocaleTimeString();
  return h('time', { datetime: d.toISOString(), title: d.toString() }, text);
}

/**
 * view renders a tool's view (RAP VU-1). The content is the tool's own
 * object: a progress bar when it has a progress (0–1 or a percentage) or
 * done/current and total, its label or message as text, the rest as JSON.
 */
export function view(type, content) {
  const c = content && typeof content === 'object' ? content : {};
  const parts = [];
  let value = null;
  let max = 1;
  if (typeof c.progress === 'number') {
    value = c.progress > 1 ? c.progress / 100 : c.progress;
  } else if (typeof c.total === 'number' && c.total > 0) {
    const done = typeof c.done === 'number' ? c.done : c.current;
    if (typeof done === 'number') {
      value = done;
      max = c.total;
    }
  }
  const label = [c.label, c.title, c.message, c.status].find((x) => typeof x === 'string');
  if (label) parts.push(h('div', { class: 'text' }, label));
  if (value !== null) {
    const pct = Math.round((value / max) * 100);
    parts.push(h('progress', { value: String(value), max: String(max), 'aria-label': type }), h('span', { class: 'pct' }, ` ${pct}%`));
  }
  const rest = Object.fromEntries(Object.entries(c).filter(([k]) => !['progress', 'total', 'done', 'current', 'label', 'title', 'message', 'status'].includes(k)));
  if (Object.keys(rest).length) parts.push(json(rest));
  return h('section', { class: 'view', 'data-view': type }, h('h3', {}, type), parts);
}
