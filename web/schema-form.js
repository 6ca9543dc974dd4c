// Builds an HTML form from a tool's JSON Schema (its inputSchema) and reads it back as arguments.
// Supported: string (with enum and a few formats), number, integer, boolean, enum, array of strings (one per line);
// anything else (objects, other arrays, anyOf/oneOf) is a JSON textarea. Optional fields left empty are omitted.

let nextId = 0;

/** The element factory shared with app.js: h('tag', {attr: value, onclick: fn}, ...children). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** The one type a field is edited as. */
function kindOf(schema) {
  if (!schema || typeof schema !== 'object') return 'json';
  if (Array.isArray(schema.enum) && schema.enum.every((v) => ['string', 'number', 'boolean'].includes(typeof v))) return 'enum';
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null');
  if (type === 'string') return 'string';
  if (type === 'integer') return 'integer';
  if (type === 'number') return 'number';
  if (type === 'boolean') return 'boolean';
  if (type === 'array') {
    let items = schema.items && schema.items.type;
    if (Array.isArray(items)) items = items.find((t) => t !== 'null');
    return items === 'string' && !schema.items.enum ? 'strings' : 'json';
  }
  return 'json';
}

const INPUT_TYPES = { email: 'email', uri: 'url', url: 'url', date: 'date', 'date-time': 'datetime-local' };

function typeLabel(kind, schema) {
  if (kind === 'strings') return 'list of strings, one per line';
  if (kind === 'json') return (Array.isArray(schema.type) ? schema.type.join('|') : schema.type || 'any') + ', as JSON';
  if (kind === 'enum') return 'one of ' + schema.enum.map((v) => JSON.stringify(v)).join(', ');
  return schema.format ? `${kind} (${schema.format})` : kind;
}

function control(kind, schema, required, id, helpId) {
  const common = { id, name: id, 'aria-describedby': helpId, required: required && kind !== 'boolean' };
  const def = schema.default;
  switch (kind) {
    case 'enum': {
      const sel = h('select', common);
      if (!required || def === undefined) sel.append(h('option', { value: '' }, required ? '— choose —' : '(not set)'));
      schema.enum.forEach((v, i) => sel.append(h('option', { value: String(i), selected: v === def }, String(v))));
      return sel;
    }
    case 'boolean': {
      if (required) return h('input', { ...common, type: 'checkbox', checked: def === true });
      const sel = h('select', common);
      for (const [v, label] of [['', '(not set)'], ['true', 'true'], ['false', 'false']]) {
        sel.append(h('option', { value: v, selected: def !== undefined && String(def) === v }, label));
      }
      return sel;
    }
    case 'integer':
    case 'number':
      return h('input', {
        ...common, type: 'number', step: kind === 'integer' ? '1' : 'any',
        min: schema.minimum, max: schema.maximum, value: def !== undefined ? String(def) : undefined,
      });
    case 'strings':
      return h('textarea', { ...common, rows: 3 }, Array.isArray(def) ? def.join('\n') : '');
    case 'string': {
      const long = (schema.maxLength || 0) > 200 || /content|body|text|query|code|message/i.test(id);
      if (long && !schema.format) return h('textarea', { ...common, rows: 3 }, def !== undefined ? String(def) : '');
      return h('input', { ...common, type: INPUT_TYPES[schema.format] || 'text', value: def !== undefined ? String(def) : undefined, autocomplete: 'off' });
    }
    default:
      return h('textarea', { ...common, rows: 4, spellcheck: false, placeholder: schema.type === 'array' ? '[]' : '{}' },
        def !== undefined ? JSON.stringify(def, null, 2) : '');
  }
}

/**
 * Renders fields for `schema` into `container` and returns `read()`, which yields
 * `{ok: true, value}` or `{ok: false, error, field}` (the field is focused).
 */
export function buildForm(schema, container) {
  container.replaceChildren();
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = [];
  const names = Object.keys(props).sort((a, b) => Number(required.has(b)) - Number(required.has(a)));
  for (const name of names) {
    const s = props[name] || {};
    const kind = kindOf(s);
    const id = `f${++nextId}-${name}`;
    const helpId = `${id}-help`;
    const input = control(kind, s, required.has(name), id, helpId);
    input.dataset.arg = name;
    const wrap = h('div', { class: 'field', dataset: { arg: name } },
      h('label', { for: id }, name, required.has(name) ? h('span', { class: 'req', 'aria-hidden': 'true' }, '*') : null,
        h('span', { class: 'type' }, typeLabel(kind, s))),
      input,
      h('div', { class: 'help', id: helpId }, s.description || s.title || ''));
    container.append(wrap);
    fields.push({ name, kind, schema: s, input, wrap, required: required.has(name) });
  }
  if (!names.length) container.append(h('p', { class: 'note' }, 'This tool takes no arguments.'));

  function fail(f, error) {
    f.wrap.classList.add('invalid');
    f.input.focus();
    return { ok: false, error: `${f.name}: ${error}`, field: f.name };
  }

  function read() {
    const value = {};
    for (const f of fields) {
      f.wrap.classList.remove('invalid');
      const el = f.input;
      let raw = el.type === 'checkbox' ? el.checked : el.value;
      if (f.kind === 'boolean' && el.type === 'checkbox') { value[f.name] = raw; continue; }
      if (typeof raw === 'string' && raw.trim() === '') {
        if (f.required) return fail(f, 'required');
        continue;
      }
      switch (f.kind) {
        case 'enum': value[f.name] = f.schema.enum[Number(raw)]; break;
        case 'boolean': value[f.name] = raw === 'true'; break;
        case 'integer':
        case 'number': {
          const n = Number(raw);
          if (!Number.isFinite(n) || (f.kind === 'integer' && !Number.isInteger(n))) return fail(f, `not ${f.kind === 'integer' ? 'a whole number' : 'a number'}`);
          value[f.name] = n;
          break;
        }
        case 'strings': value[f.name] = raw.split('\n').map((l) => l.trim()).filter(Boolean); break;
        case 'string': value[f.name] = el.type === 'datetime-local' ? new Date(raw).toISOString() : raw; break;
        default:
          try { value[f.name] = JSON.parse(raw); } catch (e) { return fail(f, `not valid JSON (${e.message})`); }
      }
    }
    return { ok: true, value };
  }
  return { read, fields };
}
