// The dashboard's Profiles section: every profile (its servers, tool globs, the known tools it holds and how to
// connect to it), a form to create one, and removal. Over the REST routes under /api/profiles.

import { h } from './schema-form.js';

const $ = (sel, root = document) => root.querySelector(sel);
const list = (text) => text.split(/[\n,]/).map((s) => s.trim()).filter(Boolean);

/** Wires the section; `api`, `toast` and `act` are the dashboard's helpers. Returns the function that reloads it. */
export function initProfiles({ api, toast, act }) {
  const form = $('#profile-form');

  function card(p) {
    const remove = h('button', { type: 'button', class: 'ghost', 'aria-label': `Remove profile ${p.name}` }, 'Remove');
    remove.addEventListener('click', () => act(remove, async () => {
      await api('DELETE', `/api/profiles/${encodeURIComponent(p.name)}`);
      toast(`removed profile ${p.name}`);
      await load();
    }));
    const tools = p.known_tools || [];
    return h('article', { class: 'card', 'data-profile': p.name },
      h('header', { class: 'row' }, h('strong', {}, p.name), h('span', { class: 'pill' }, `${tools.length} tools`), remove),
      p.description ? h('p', { class: 'description' }, p.description) : '',
      h('p', {}, 'Servers: ', (p.servers || []).length ? (p.servers || []).join(', ') : '–'),
      h('p', {}, 'Tool globs: ', (p.tools || []).length ? (p.tools || []).join(', ') : '–'),
      h('p', {}, 'Connect: ', h('code', {}, p.endpoint), ' · ', h('code', {}, `agent-discover ${(p.stdio || []).join(' ')}`)),
      h('p', { class: 'tool-list' }, ...tools.slice(0, 100).map((t) => h('code', {}, t))));
  }

  async function load() {
    try {
      const r = await api('GET', '/api/profiles');
      // Each profile as `show` gives it: with the tools it holds now.
      const shown = await Promise.all(r.profiles.map((p) => api('GET', `/api/profiles/${encodeURIComponent(p.name)}`)));
      $('#profile-list').replaceChildren(...shown.map(card));
      $('#profile-empty').hidden = shown.length > 0;
      $('#count-profiles').textContent = String(shown.length);
    } catch (e) { toast(`cannot read profiles: ${e.message}`, true); }
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = form.elements;
    const error = $('.form-error', form);
    error.textContent = '';
    act(e.submitter, async () => {
      try {
        await api('POST', '/api/profiles', {
          name: f.name.value.trim(),
          description: f.description.value.trim(),
          servers: list(f.servers.value),
          tools: list(f.tools.value),
        });
      } catch (err) { error.textContent = err.message; return; }
      toast(`created profile ${f.name.value.trim()}`);
      form.reset();
      await load();
    });
  });
  return load;
}
