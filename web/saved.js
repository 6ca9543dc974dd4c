// The dashboard's Saved scripts section (beside Profiles): every code-mode script saved as the tool scripts__NAME,
// its description and whether the tool is withheld, its body and input schema on demand, and removal. Over the REST
// routes under /api/scripts/saved.

import { h } from './schema-form.js';

const $ = (sel, root = document) => root.querySelector(sel);

/** Wires the section; `api`, `toast` and `act` are the dashboard's helpers. Returns the function that reloads it. */
export function initSavedScripts({ api, toast, act }) {
  function card(s) {
    const path = `/api/scripts/saved/${encodeURIComponent(s.name)}`;
    const detail = h('div', { class: 'script-detail', hidden: true });
    const show = h('button', { type: 'button', class: 'ghost', 'aria-expanded': 'false', 'aria-label': `Show script ${s.name}` }, 'Show');
    show.addEventListener('click', () => act(show, async () => {
      if (!detail.hidden) {
        detail.hidden = true;
        show.setAttribute('aria-expanded', 'false');
        return;
      }
      const full = await api('GET', path);
      detail.replaceChildren(
        h('h3', {}, 'Body'), h('pre', { class: 'script-body' }, full.code || ''),
        h('h3', {}, 'Input schema'), h('pre', { class: 'script-schema' }, JSON.stringify(full.input_schema, null, 2)));
      detail.hidden = false;
      show.setAttribute('aria-expanded', 'true');
    }));
    const remove = h('button', { type: 'button', class: 'ghost', 'aria-label': `Remove script ${s.name}` }, 'Remove');
    remove.addEventListener('click', () => act(remove, async () => {
      await api('DELETE', path);
      toast(`removed script ${s.name}`);
      await load();
    }));
    return h('article', { class: 'card', 'data-script': s.name },
      h('header', { class: 'row' }, h('strong', {}, s.name), h('code', {}, s.tool),
        s.withheld ? h('span', { class: 'pill elsewhere' }, 'withheld until approved') : '', show, remove),
      s.description ? h('p', { class: 'description' }, s.description) : '',
      detail);
  }

  async function load() {
    try {
      const r = await api('GET', '/api/scripts/saved');
      $('#script-list').replaceChildren(...r.scripts.map(card));
      $('#script-empty').hidden = r.scripts.length > 0;
    } catch (e) { toast(`cannot read saved scripts: ${e.message}`, true); }
  }
  return load;
}
