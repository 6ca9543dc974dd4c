// The dashboard's "My keys" section of a server: the signed-in user's own values of the server's secrets (masked),
// a form to set one and removal; with identity off it says what it needs. Over /api/servers/{id}/my-secrets.

import { h } from './schema-form.js';

/** Fills `body` for server `id`; `api`, `toast`, `act` are the dashboard's helpers, `reload` shows it again. */
export async function loadMyKeys(body, id, { api, toast, act, reload }) {
  let mine;
  try {
    mine = await api('GET', `/api/servers/${id}/my-secrets`);
  } catch (e) {
    body.replaceChildren(h('p', { class: 'note' }, e.message));
    return;
  }
  const keyInput = h('input', { name: 'key', placeholder: 'API_KEY', 'aria-label': 'Your key name', required: true, autocomplete: 'off' });
  const valueInput = h('input', { name: 'value', type: 'password', placeholder: 'your value', 'aria-label': 'Your value', required: true, autocomplete: 'off' });
  const form = h('form', { class: 'secret-form' }, keyInput, valueInput, h('button', { type: 'submit' }, 'Set my key'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(form.querySelector('button'), async () => {
      const key = keyInput.value.trim();
      await api('PUT', `/api/servers/${id}/my-secrets/${encodeURIComponent(key)}`, { value: valueInput.value });
      toast(`your ${key} is set; your next call runs with it`);
      reload();
    });
  });
  const rows = mine.secrets || [];
  // An administrator also sees who has keys of their own (never the values) and the rule for the others.
  let admin = '';
  try {
    const v = await api('GET', `/api/servers/${id}/personal-keys`);
    const toggle = h('input', { type: 'checkbox', 'aria-label': 'Users without their own keys use the shared ones' });
    toggle.checked = v.allow_shared;
    toggle.addEventListener('change', () => act(toggle, async () => {
      await api('PUT', `/api/servers/${id}/personal-keys`, { allow_shared: toggle.checked });
      toast(toggle.checked ? 'users without their own keys use the shared ones' : 'users without their own keys are refused');
    }));
    admin = h('div', {},
      h('label', {}, toggle, ' users without their own keys use the shared ones'),
      h('p', { class: 'note' }, v.users.length
        ? `Own keys: ${v.users.map((u) => `${u.user} (${u.keys.join(', ')})`).join('; ')}; ${v.children.length} of their children running here.`
        : 'No user has keys of their own.'));
  } catch (_) {
    // Not an administrator: nothing more to show.
  }
  body.replaceChildren(
    rows.length
      ? h('table', { class: 'mini' }, h('tbody', {}, rows.map((r) => h('tr', {},
        h('td', {}, h('code', {}, r.key)), h('td', {}, r.masked_value),
        h('td', {}, h('button', { type: 'button', class: 'ghost danger', 'aria-label': `Delete my ${r.key}`,
          onclick: (e) => act(e.currentTarget, async () => {
            await api('DELETE', `/api/servers/${id}/my-secrets/${encodeURIComponent(r.key)}`);
            reload();
          }) }, 'Delete'))))))
      : h('p', { class: 'note' }, `No keys of your own (${mine.user}): your calls use the shared ones, if the server allows it.`),
    form, admin);
}
