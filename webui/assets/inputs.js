// User inputs (the user_input gorap extension): a form of typed fields a
// tool asks the user to fill in. inputForm builds it; the values it
// collects have each field's JSON type, and empty fields are left out.
import { h } from './render.js';

let seq = 0;

// inputForm returns the form of user input d ({call_id, name, prompt,
// fields}). submit(values) and dismiss() answer it; each returns a promise
// whose rejection is shown in the form.
export function inputForm(d, submit, dismiss) {
  const id = 'in' + (++seq);
  const error = h('p', { class: 'input-error', role: 'alert' });
  const rows = (d.fields || []).map((f, i) => fieldRow(f, `${id}-${i}`));
  const form = h('form', { class: 'input-form', 'data-input': d.call_id },
    h('fieldset', { class: 'choice' },
      h('legend', {}, (d.name || 'a tool') + ' asks'),
      h('p', { class: 'prompt' }, d.prompt || ''),
      ...rows.map((r) => r.row),
      error,
      h('div', { class: 'choice-buttons' },
        h('button', { type: 'submit', class: 'default' }, 'Send'),
        h('button', { type: 'button', class: 'dismiss', onclick: () => run(dismiss) }, 'Dismiss'))));
  const run = async (fn) => {
    error.textContent = '';
    for (const b of form.querySelectorAll('button, input, select')) b.disabled = true;
    try {
      await fn();
    } catch (err) {
      for (const b of form.querySelectorAll('button, input, select')) b.disabled = false;
      error.textContent = 'Not sent: ' + err.message;
    }
  };
  // Enter in a field submits the form; the browser checks required
  // fields, bounds and types first and names the field to fix.
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const values = {};
    for (const r of rows) {
      const v = r.value();
      if (v !== undefined) values[r.name] = v;
    }
    run(() => submit(values));
  });
  return form;
}

// fieldRow returns the label and control of field f, and how to read its
// value (undefined when empty).
function fieldRow(f, id) {
  const label = f.title || f.name;
  const descID = f.description ? id + '-desc' : null;
  const common = { id, name: f.name, 'aria-describedby': descID };
  if (f.required) common.required = true;
  let control;
  let value;
  switch (f.type) {
    case 'boolean':
      control = h('input', Object.assign({ type: 'checkbox' }, common));
      control.checked = f.default === true;
      value = () => control.checked;
      break;
    case 'enum': {
      const opts = (f.options || []).map((o) => h('option', { value: o }, o));
      if (!f.required || f.default === undefined) opts.unshift(h('option', { value: '' }, f.required ? 'Choose…' : '—'));
      control = h('select', common, opts);
      control.value = typeof f.default === 'string' ? f.default : '';
      value = () => (control.value === '' ? undefined : control.value);
      break;
    }
    case 'number':
    case 'integer': {
      const attrs = Object.assign({ type: 'number', step: f.type === 'integer' ? '1' : 'any' }, common);
      if (f.minimum !== undefined) attrs.min = String(f.minimum);
      if (f.maximum !== undefined) attrs.max = String(f.maximum);
      control = h('input', attrs);
      if (typeof f.default === 'number') control.value = String(f.default);
      value = () => (control.value === '' ? undefined : Number(control.value));
      break;
    }
    default: {
      const type = { email: 'email', uri: 'url', date: 'date' }[f.format] || 'text';
      const attrs = Object.assign({ type }, common);
      if (f.min_length !== undefined) attrs.minlength = String(f.min_length);
      if (f.max_length !== undefined) attrs.maxlength = String(f.max_length);
      if (f.format === 'date-time') attrs.placeholder = '2006-01-02T15:04:05Z';
      control = h('input', attrs);
      if (typeof f.default === 'string') control.value = f.default;
      value = () => (control.value === '' ? undefined : control.value);
    }
  }
  const text = [label, f.required ? h('span', { class: 'required', 'aria-hidden': 'true' }, ' *') : null];
  const row = f.type === 'boolean'
    ? h('div', { class: 'input-row check' }, control, h('label', { for: id }, ...text))
    : h('div', { class: 'input-row' }, h('label', { for: id }, ...text), control);
  if (descID) row.append(h('small', { id: descID, class: 'input-desc' }, f.description));
  return { row, name: f.name, value };
}
