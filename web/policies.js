// The dashboard's Policies section: the policies for calls in force (files, ids, effect, scope), where they come
// from, the last load's failure while an older set stays in force, and a dry run of a call against them. Over the
// REST routes under /api/policy (list, reload, test).

import { h } from './schema-form.js';

const $ = (sel, root = document) => root.querySelector(sel);
const list = (text) => text.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);

/** Wires the section; `api`, `toast` and `act` are the dashboard's helpers. Returns the function that reloads it. */
export function initPolicies({ api, toast, act }) {
  const form = $('#policy-test-form');

  function row(p) {
    const effect = p.effect + (p.ask ? ' (ask)' : '');
    return h('tr', { 'data-policy': p.id, 'data-effect': p.effect },
      h('td', {}, h('code', {}, p.id)),
      h('td', {}, h('span', { class: 'pill' }, effect)),
      h('td', {}, h('code', {}, p.scope)),
      h('td', { title: p.file }, p.file.split('/').pop()),
      h('td', {}, h('details', {}, h('summary', {}, 'text'), h('pre', {}, p.text))));
  }

  function render(r) {
    const files = r.files || [];
    $('#policy-source').textContent = r.source
      ? `${r.policies} ${r.policies === 1 ? 'policy' : 'policies'} from ${files.length} ${files.length === 1 ? 'file' : 'files'} in ${r.source}`
        + (r.loaded_at ? `, loaded ${new Date(r.loaded_at).toLocaleString()}` : '')
        + (r.digest ? ` · digest ${r.digest}` : '')
      : 'No policy source in this process.';
    const err = $('#policy-error');
    if (r.error) {
      const where = r.error.file ? `${r.error.file}: ` : '';
      err.replaceChildren(
        h('strong', {}, 'The last load failed; the previous set stays in force. '),
        `${where}${r.error.message}`,
        r.error_at ? ` (${new Date(r.error_at).toLocaleString()})` : '');
      err.hidden = false;
    } else {
      err.hidden = true;
    }
    const rows = r.list || [];
    $('#policy-rows').replaceChildren(...rows.map(row));
    $('#policy-table').hidden = rows.length === 0;
    $('#policy-empty').hidden = rows.length > 0;
    $('#count-policies').textContent = String(rows.length);
  }

  async function load() {
    try {
      render(await api('GET', '/api/policy'));
    } catch (e) {
      $('#policy-source').textContent = e.message;
      $('#policy-rows').replaceChildren();
      $('#policy-table').hidden = true;
    }
  }

  $('#policy-reload').addEventListener('click', (e) => act(e.currentTarget, async () => {
    await api('POST', '/api/policy/reload');
    await load();
    toast('policy files read again');
  }));

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = form.elements;
    const error = $('.form-error', form);
    error.textContent = '';
    const body = { server: f.server.value.trim(), tool: f.tool.value.trim(), script: f.script.checked };
    if (f.user.value.trim()) body.user = f.user.value.trim();
    if (f.groups.value.trim()) body.groups = list(f.groups.value);
    if (f.client.value.trim()) body.client = f.client.value.trim();
    if (f.arguments.value.trim()) {
      try { body.arguments = JSON.parse(f.arguments.value); } catch (err) { error.textContent = `arguments: ${err.message}`; return; }
      if (!body.arguments || typeof body.arguments !== 'object' || Array.isArray(body.arguments)) {
        error.textContent = 'arguments: give a JSON object';
        return;
      }
    }
    act(e.submitter, async () => {
      let d;
      try { d = await api('POST', '/api/policy/test', body); } catch (err) { error.textContent = err.message; return; }
      const out = $('#policy-decision');
      const by = (d.decided_by || []).length ? ` by ${d.decided_by.join(', ')}` : (d.outcome === 'deny' ? ' by default' : '');
      out.dataset.outcome = d.outcome;
      out.replaceChildren(
        h('strong', {}, `${d.outcome}${by}`),
        h('span', { class: 'pill' }, d.policed ? 'policed' : 'not policed'),
        h('p', {}, d.reason));
      out.hidden = false;
    });
  });
  return load;
}
