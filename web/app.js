// The agent-discover dashboard: state arrives over the WebSocket (/ws), actions go through the REST API (/api).
// No framework and no build step; the server embeds these files as they are.

import { h, buildForm } from './schema-form.js';
import { initProfiles } from './profiles.js';
import { loadMyKeys } from './personal.js';
import { initPolicies } from './policies.js';
import { initSavedScripts } from './saved.js';

const $ = (sel, root = document) => root.querySelector(sel);

const state = {
  seq: 0,
  servers: [], // from the latest snapshot, each with tools and `running`
  approvals: [], // calls waiting for a person's approval, from the latest snapshot
  pendingTools: 0,
  children: new Map(), // name -> child status (runs in the dashboard's process)
  logs: [], // newest first
  logIds: new Set(),
  testServer: '',
  testTool: '',
};

// ---------- helpers ----------

async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!res.ok) {
    const err = new Error((data && data.error) || `${res.status} ${res.statusText}`);
    err.status = res.status;
    err.code = data && data.code;
    throw err;
  }
  return data;
}

function toast(message, bad = false) {
  const el = h('div', { class: bad ? 'msg bad' : 'msg' }, message);
  $('#toast').append(el);
  setTimeout(() => el.remove(), bad ? 6000 : 3000);
}

/** Runs an action from a button: disables it meanwhile, reports failure as a toast. */
async function act(button, fn) {
  if (button) button.disabled = true;
  try { return await fn(); } catch (e) { toast(e.message, true); } finally { if (button) button.disabled = false; }
}

function fmtTime(ts) {
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toLocaleTimeString();
}

// ---------- tabs and keyboard ----------

const TABS = ['servers', 'browse', 'logs', 'test', 'pins', 'profiles', 'policies'];

function showTab(name, focus = true) {
  for (const t of TABS) {
    const tab = $(`#tab-${t}`);
    const on = t === name;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    $(`#panel-${t}`).hidden = !on;
  }
  if (focus) $(`#tab-${name}`).focus();
  if (name === 'test') renderTestPickers();
  if (name === 'pins') loadPending();
  if (name === 'profiles') { loadProfiles(); loadSaved(); }
  if (name === 'policies') loadPolicies();
  history.replaceState(null, '', `#${name}`);
}

$('#tabs').addEventListener('click', (e) => {
  const tab = e.target.closest('[role="tab"]');
  if (tab) showTab(tab.dataset.tab);
});
$('#tabs').addEventListener('keydown', (e) => {
  const i = TABS.indexOf(document.activeElement.dataset.tab);
  if (i < 0) return;
  const step = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 }[e.key];
  if (step) { e.preventDefault(); showTab(TABS[(i + step + TABS.length) % TABS.length]); }
  if (e.key === 'Home') { e.preventDefault(); showTab(TABS[0]); }
  if (e.key === 'End') { e.preventDefault(); showTab(TABS[TABS.length - 1]); }
});

document.addEventListener('keydown', (e) => {
  const typing = e.target.closest('input, textarea, select, [contenteditable]');
  if (e.key === 'Escape' && !$('#add-form').hidden) { closeAddForm(); return; }
  // Escape leaves a field, so the single-key shortcuts work again.
  if (e.key === 'Escape' && typing) { e.target.blur(); return; }
  if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
  const n = Number(e.key);
  if (n >= 1 && n <= TABS.length) { e.preventDefault(); showTab(TABS[n - 1]); return; }
  if (e.key === '/') {
    e.preventDefault();
    const current = TABS.find((t) => !$(`#panel-${t}`).hidden);
    const search = { servers: '#server-filter', browse: '#browse-search', logs: '#log-server', test: '#test-server' }[current];
    if (search) $(search).focus();
  }
  if (e.key === 't') toggleTheme();
});

// ---------- theme ----------

function effectiveTheme() {
  const set = document.documentElement.dataset.theme;
  if (set) return set;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}
function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
  $('#theme').setAttribute('aria-label', `Switch to ${next} theme`);
}
function toggleTheme() {
  const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
  try { localStorage.setItem('agent-discover-theme', next); } catch { /* private mode */ }
  applyTheme(next);
}
applyTheme((() => { try { return localStorage.getItem('agent-discover-theme'); } catch { return null; } })());
$('#theme').addEventListener('click', toggleTheme);

// ---------- live state ----------

let socket = null;
let retry = 500;

function connect() {
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  socket = new WebSocket(`${proto}://${location.host}/ws`);
  const conn = $('#conn');
  socket.addEventListener('open', () => { retry = 500; state.seq = 0; conn.dataset.state = 'live'; conn.textContent = 'live'; });
  socket.addEventListener('message', (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg.type === 'state') applySnapshot(msg);
    else if (msg.type === 'log_entry') addLog(msg.entry, true);
    else if (msg.type === 'logs_cleared') { state.logs = []; state.logIds.clear(); renderLogs(); }
  });
  socket.addEventListener('close', () => {
    conn.dataset.state = 'down';
    conn.textContent = 'reconnecting…';
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 5000);
  });
}

function applySnapshot(msg) {
  // Snapshots are complete and numbered per connection's server; an older one arriving late is dropped.
  if (msg.seq < state.seq) return;
  state.seq = msg.seq;
  state.servers = msg.servers || [];
  state.children = new Map((msg.active || []).map((c) => [c.name, c]));
  state.approvals = msg.approvals || [];
  renderApprovals();
  if (msg.version) $('#version').textContent = `v${msg.version}`;
  renderServers();
  renderLogFilter();
  if (!$('#panel-test').hidden) renderTestPickers();
  // Tool changes and approvals arrive as snapshots too.
  loadPending();
  // Open secrets and metrics sections follow changes too (a form someone is filling in stays as it is).
  for (const d of document.querySelectorAll('#server-list details[open][data-load]')) loadSection(d, true);
}

// ---------- servers ----------

// The badge: the server's stored lifecycle status (stopped, connecting, authenticating, ready, error, disabled),
// `running` when it is ready in this process.
function statusOf(s) {
  const child = state.children.get(s.name);
  if (s.authUrl) return ['authenticating', 'elsewhere'];
  if (child && child.status === 'error') return ['error', 'error'];
  if (s.running && (s.status === 'ready' || !s.status)) return ['running', 'running'];
  switch (s.status) {
    case 'ready': return ['ready in another process', 'elsewhere'];
    case 'connecting': return ['connecting', 'elsewhere'];
    case 'authenticating': return ['authenticating', 'elsewhere'];
    case 'error': return ['error', 'error'];
    case 'disabled': return ['disabled', ''];
    default: break;
  }
  if (s.active) return ['active in another process', 'elsewhere'];
  if (s.last_error) return ['failed', 'error'];
  return ['stopped', ''];
}

function serverCard(s) {
  const card = h('article', { class: 'card server', dataset: { server: s.name, id: String(s.id) }, 'aria-label': `Server ${s.name}` });
  card.append(
    h('div', { class: 'server-head' },
      h('h2', {}, s.name),
      h('span', { class: 'pill', dataset: { role: 'status' } }),
      h('span', { class: 'dot', dataset: { role: 'health' } }),
      h('span', { class: 'pill sandbox', dataset: { role: 'sandbox' }, hidden: true }),
      h('span', { class: 'meta', dataset: { role: 'counts' } })),
    h('p', { class: 'description', dataset: { role: 'description' } }),
    h('div', { class: 'tags', dataset: { role: 'tags' } }),
    h('div', { class: 'meta', dataset: { role: 'launch' } }),
    h('div', { class: 'error-text', dataset: { role: 'error' } }),
    h('div', { class: 'actions', dataset: { role: 'actions' } }),
    h('details', { dataset: { role: 'tools-section' } }, h('summary', {}, 'Tools'), h('ul', { class: 'tool-list', dataset: { role: 'tools' } })),
    h('details', { dataset: { load: 'secrets' } }, h('summary', {}, 'Secrets'), h('div', { dataset: { role: 'body' } })),
    h('details', { dataset: { load: 'mykeys' } }, h('summary', {}, 'My keys'), h('div', { dataset: { role: 'body' } })),
    h('details', { dataset: { load: 'metrics' } }, h('summary', {}, 'Metrics'), h('div', { dataset: { role: 'body' } })),
    h('details', { dataset: { load: 'limits' } }, h('summary', {}, 'Limits'), h('div', { dataset: { role: 'body' } })),
    h('details', { dataset: { role: 'policy-section' } }, h('summary', {}, 'Approval policy'), h('div', { dataset: { role: 'policy' } })),
    h('details', { dataset: { load: 'overrides' } }, h('summary', {}, 'Tool overrides'), h('div', { dataset: { role: 'body' } })),
    h('details', { dataset: { role: 'child-section' } }, h('summary', {}, 'Process'), h('div', { dataset: { role: 'child' } })),
  );
  for (const d of card.querySelectorAll('details[data-load]')) {
    d.addEventListener('toggle', () => { if (d.open) loadSection(d); });
  }
  return card;
}

function fill(card, s) {
  const role = (r) => card.querySelector(`[data-role="${r}"]`);
  const [label, cls] = statusOf(s);
  const pill = role('status');
  pill.textContent = label;
  pill.className = `pill ${cls}`;
  pill.dataset.status = s.status || '';
  pill.title = s.status === 'authenticating' && s.auth_url ? `authorize at ${s.auth_url}` : '';
  const health = role('health');
  health.className = `dot ${s.health_status}`;
  health.textContent = s.health_status === 'unknown' ? 'health unknown' : s.health_status;
  health.title = s.last_health_check ? `checked ${s.last_health_check}` : 'never checked';
  fillSandbox(role('sandbox'), s);
  role('counts').textContent = `${s.tools.length} tools · ${s.transport} · ${s.source}` + (s.error_count ? ` · ${s.error_count} errors` : '');
  role('description').textContent = s.description || '';
  role('tags').replaceChildren(...(s.tags || []).map((t) => h('span', { class: 'tag' }, t)));
  role('launch').textContent = s.transport === 'stdio' ? [s.command, ...(s.args || [])].join(' ') : s.url || '';
  const child = state.children.get(s.name);
  const err = (child && child.last_error) || s.last_error || '';
  role('error').textContent = err;
  role('error').hidden = !err;

  const actions = role('actions');
  actions.replaceChildren(
    s.status === 'disabled'
      ? h('button', { type: 'button', class: 'primary', onclick: (e) => act(e.currentTarget, () => enable(s)) }, 'Enable')
      : s.running
        ? h('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => deactivate(s)) }, 'Deactivate')
        : h('button', { type: 'button', class: 'primary', onclick: (e) => act(e.currentTarget, () => activate(s)) }, 'Activate'),
    ...(s.status === 'disabled' ? [] : [h('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => disable(s)) }, 'Disable')]),
    // A remote server waiting for OAuth: the person authorizes in a new tab; the callback comes back here.
    ...(s.authUrl ? [h('a', { class: 'button primary', href: s.authUrl, target: '_blank', rel: 'noopener' }, 'Authorize')] : []),
    h('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => checkHealth(s)) }, 'Check health'),
    h('button', { type: 'button', disabled: !s.tools.length, onclick: () => { state.testServer = s.name; state.testTool = ''; showTab('test'); } }, 'Test'),
    h('button', { type: 'button', class: 'danger ghost', onclick: (e) => act(e.currentTarget, () => remove(s)) }, 'Delete'),
  );
  for (const b of actions.children) b.setAttribute('aria-label', `${b.textContent} ${s.name}`);

  role('tools').replaceChildren(...s.tools.map((t) => h('li', {}, h('code', {}, t.name), h('span', {}, t.description || ''))));
  fillPolicy(role('policy'), s);
  role('tools-section').hidden = !s.tools.length;
  if (s.tools.length && s.running && !card.dataset.seenRunning) role('tools-section').open = true;
  card.dataset.seenRunning = s.running ? '1' : '';

  role('child-section').hidden = !child;
  if (child) {
    role('child').replaceChildren(
      h('p', { class: 'meta' }, `pid ${child.pid ?? '—'} · protocol ${child.protocol || '—'} · started ${child.started_at || '—'} · restarts ${child.restarts}`),
      child.stderr_tail && child.stderr_tail.length ? h('pre', {}, child.stderr_tail.join('\n')) : h('p', { class: 'note' }, 'No stderr output.'),
    );
  }
}

// ---------- approval policies (#27) ----------

function ruleLabel(r) {
  if (r.scope === 'tool') return `tool ${r.tool}`;
  if (r.scope === 'annotation') return `tools annotated ${r.annotation}`;
  return 'every tool (server-wide)';
}

// A server's approval rules and a control to set one: the target (server-wide, a tool, an annotation) and the policy.
function fillPolicy(box, s) {
  const rules = s.tool_policy || [];
  const key = JSON.stringify(rules) + s.tools.map((t) => t.name).join(',');
  if (box.dataset.key === key) return; // unchanged: keep what the person is choosing
  box.dataset.key = key;
  const target = h('select', { 'aria-label': `Rule target for ${s.name}` },
    h('option', { value: '' }, 'every tool (server-wide)'),
    h('option', { value: 'annotation:destructive' }, 'tools annotated destructive'),
    h('option', { value: 'annotation:open_world' }, 'tools annotated open_world'),
    ...s.tools.map((t) => h('option', { value: `tool:${t.name}` }, `tool ${t.name}`)));
  const policy = h('select', { 'aria-label': `Policy for ${s.name}` },
    h('option', { value: 'ask' }, 'ask a person'), h('option', { value: 'deny' }, 'deny'),
    h('option', { value: 'allow' }, 'allow'), h('option', { value: 'clear' }, 'remove the rule'));
  const form = h('form', { class: 'row policy-form' }, target, policy, h('button', { type: 'submit' }, 'Set rule'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const t = target.value;
    const body = { policy: policy.value === 'clear' ? null : policy.value };
    if (t.startsWith('tool:')) body.tool = t.slice(5);
    if (t.startsWith('annotation:')) body.annotation = t.slice(11);
    act(form.querySelector('button'), async () => {
      await api('PUT', `/api/servers/${s.id}/tool-policy`, body);
      toast(`${s.name}: ${policy.value === 'clear' ? 'rule removed' : `${policy.value} for ${target.selectedOptions[0].textContent}`}`);
    });
  });
  box.replaceChildren(
    rules.length
      ? h('table', { class: 'mini' }, h('tbody', {}, rules.map((r) => h('tr', { 'data-rule': r.scope },
        h('td', {}, ruleLabel(r)), h('td', {}, h('span', { class: `pill policy-${r.policy}` }, r.policy))))))
      : h('p', { class: 'note' }, 'No rules: every tool is allowed. A tool rule beats an annotation rule, which beats the server-wide rule.'),
    form);
}

// Calls waiting for a person: server, tool, the exact arguments; approve once, for the session, or deny.
function approvalCard(a) {
  const decide = (path, body, done) => (e) => act(e.currentTarget, async () => {
    await api('POST', `/api/approvals/${encodeURIComponent(a.id)}/${path}`, { ...body, by: 'dashboard' });
    toast(`${a.server}__${a.tool}: ${done}`);
  });
  return h('article', { class: 'card approval', 'data-approval': a.id, 'aria-label': `Call of ${a.server}__${a.tool} waiting for approval` },
    h('header', { class: 'row' }, h('strong', {}, `${a.server}__${a.tool}`),
      h('span', { class: 'pill' }, `until ${fmtTime(a.deadline)}`),
      a.session ? h('span', { class: 'meta' }, `session ${a.session}`) : null),
    h('pre', { class: 'arguments' }, JSON.stringify(a.arguments, null, 2)),
    h('p', { class: 'meta' }, `asked ${fmtTime(a.requested_at)} · bound to sha256:${a.digest.slice(0, 16)}…`),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'primary', onclick: decide('approve', { scope: 'once' }, 'approved once') }, 'Approve once'),
      h('button', { type: 'button', disabled: !a.session, title: a.session ? '' : 'this caller has no session',
        onclick: decide('approve', { scope: 'session' }, 'approved for the session') }, 'Approve for this session'),
      h('button', { type: 'button', class: 'danger', onclick: decide('deny', {}, 'denied') }, 'Deny')));
}

function renderApprovals() {
  const list = state.approvals;
  $('#approval-empty').hidden = list.length > 0;
  $('#approval-list').replaceChildren(...list.map(approvalCard));
  $('#count-pins').textContent = String(state.pendingTools + list.length);
}

// A stdio server's sandbox badge: on (with `network none` when it has no network) or off; remote servers have none.
function fillSandbox(badge, s) {
  const sb = s.sandbox;
  badge.hidden = !sb;
  if (!sb) return;
  badge.dataset.state = sb.effective ? 'on' : 'off';
  badge.textContent = !sb.effective ? 'sandbox: off' : sb.network === 'none' ? 'sandbox: on · network none' : sb.network === 'hosts' ? 'sandbox: on · allowed hosts' : 'sandbox: on';
  badge.title = sb.effective
    ? `confined at its next start; network ${sb.network} (agent-discover sandbox show ${s.name})`
    : sb.enabled
      ? 'runs unconfined: AGENT_DISCOVER_SANDBOX=off turns the sandbox off for every server'
      : `runs unconfined: turned off for this server (agent-discover sandbox set ${s.name} --on)`;
}

function renderServers() {
  const list = $('#server-list');
  const filter = $('#server-filter').value.trim().toLowerCase();
  $('#count-servers').textContent = String(state.servers.length);
  const existing = new Map([...list.querySelectorAll('article.server')].map((c) => [c.dataset.id, c]));
  const wanted = [];
  for (const s of state.servers) {
    let card = existing.get(String(s.id));
    if (!card) card = serverCard(s);
    existing.delete(String(s.id));
    fill(card, s);
    const text = `${s.name} ${s.description} ${(s.tags || []).join(' ')}`.toLowerCase();
    card.hidden = Boolean(filter) && !text.includes(filter);
    wanted.push(card);
  }
  for (const gone of existing.values()) gone.remove();
  // Re-append in order; moving a node keeps its open sections and focus.
  wanted.forEach((card, i) => { if (list.children[i] !== card) list.insertBefore(card, list.children[i] || null); });
  const empty = $('#server-empty');
  if (!state.servers.length && !empty) {
    list.append(h('p', { class: 'empty', id: 'server-empty' }, 'No servers registered yet. Add one here, install one from Browse, or ask your agent (registry action install).'));
  } else if (state.servers.length && empty) empty.remove();
}
$('#server-filter').addEventListener('input', renderServers);

async function activate(s) {
  const r = await api('POST', `/api/servers/${s.id}/activate`);
  toast(`${s.name}: ${r.status.replace('_', ' ')}, ${r.tool_count} tools`);
}
async function deactivate(s) {
  const r = await api('POST', `/api/servers/${s.id}/deactivate`);
  toast(`${s.name}: ${r.status.replace('_', ' ')}`);
}
async function enable(s) {
  const r = await api('POST', `/api/servers/${s.id}/enable`);
  const what = r.state === 'ready' ? `ready, ${r.toolCount} tools`
    : r.state === 'authenticating' ? `authorize at ${r.authUrl}`
      : r.state === 'error' ? `${r.error.kind}: ${r.error.message}` : r.state;
  toast(`${s.name}: enabled, ${what}`, r.state === 'error');
}
async function disable(s) {
  const r = await api('POST', `/api/servers/${s.id}/disable`);
  toast(`${s.name}: ${r.status.replace('_', ' ')}`);
}
async function checkHealth(s) {
  const r = await api('POST', `/api/servers/${s.id}/health`);
  toast(`${s.name}: ${r.status} in ${r.latency_ms} ms${r.error ? ` — ${r.error}` : ''}`, r.status !== 'healthy');
}
async function remove(s) {
  if (!confirm(`Remove ${s.name} with its tools, secrets and metrics?`)) return;
  await api('DELETE', `/api/servers/${s.id}`);
  toast(`${s.name} removed`);
}

// A section's form that someone has started filling in is marked, so the refreshes snapshots bring (they arrive
// whenever anything changes, calls included) keep it. The person's own actions (opening the section, a change sent
// and done) load it afresh, and a refresh that finishes after such a load leaves the form that load made.
$('#server-list').addEventListener('input', (e) => {
  const form = e.target.closest('details[data-load] form');
  if (form) form.dataset.edited = '1';
});

/** Fills an open section of a server's card; `keepEdited`: a refresh, which keeps a form being filled in. */
async function loadSection(details, keepEdited = false) {
  const card = details.closest('article.server');
  const id = card.dataset.id;
  const body = details.querySelector('[data-role="body"]');
  const load = String(Number(details.dataset.loads || 0) + 1);
  details.dataset.loads = load;
  const edited = keepEdited ? body.querySelector('form[data-edited]') : null;
  await fillSection(details, id, body);
  if (!edited || details.dataset.loads !== load) return;
  const fresh = body.querySelector('form');
  if (fresh && fresh !== edited) fresh.replaceWith(edited);
}

async function fillSection(details, id, body) {
  try {
    if (details.dataset.load === 'mykeys') {
      await loadMyKeys(body, id, { api, toast, act, reload: () => loadSection(details) });
    } else if (details.dataset.load === 'overrides') {
      await loadOverrides(details, id, body);
    } else if (details.dataset.load === 'metrics') {
      const rows = await api('GET', `/api/servers/${id}/metrics`);
      body.replaceChildren(rows.length
        ? h('table', { class: 'mini' },
          h('thead', {}, h('tr', {}, h('th', {}, 'Tool'), h('th', { class: 'num' }, 'Calls'), h('th', { class: 'num' }, 'Errors'), h('th', { class: 'num' }, 'Avg ms'), h('th', {}, 'Last call'))),
          h('tbody', {}, rows.map((m) => h('tr', {}, h('td', {}, m.tool_name), h('td', { class: 'num' }, m.call_count), h('td', { class: 'num' }, m.error_count),
            h('td', { class: 'num' }, m.avg_latency_ms.toFixed(1)), h('td', {}, m.last_called_at ? fmtTime(m.last_called_at) : '—')))))
        : h('p', { class: 'note' }, 'No calls recorded yet.'));
    } else if (details.dataset.load === 'limits') {
      body.replaceChildren(...limitsView(await api('GET', `/api/servers/${id}/limits`), id, details));
    } else {
      const rows = await api('GET', `/api/servers/${id}/secrets`);
      const keyInput = h('input', { name: 'key', placeholder: 'API_KEY', 'aria-label': 'Secret name', required: true, autocomplete: 'off' });
      const valueInput = h('input', { name: 'value', type: 'password', placeholder: 'value', 'aria-label': 'Secret value', required: true, autocomplete: 'off' });
      const form = h('form', { class: 'secret-form' }, keyInput, valueInput, h('button', { type: 'submit' }, 'Set secret'));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        act(form.querySelector('button'), async () => {
          await api('PUT', `/api/servers/${id}/secrets/${encodeURIComponent(keyInput.value.trim())}`, { value: valueInput.value });
          toast(`secret ${keyInput.value.trim()} set; used at the next activation`);
          loadSection(details);
        });
      });
      body.replaceChildren(
        rows.length
          ? h('table', { class: 'mini' }, h('tbody', {}, rows.map((r) => h('tr', {},
            h('td', {}, h('code', {}, r.key)), h('td', {}, r.masked_value), h('td', { class: 'note' }, fmtTime(r.updated_at)),
            h('td', {}, h('button', { type: 'button', class: 'ghost danger', 'aria-label': `Delete secret ${r.key}`,
              onclick: (e) => act(e.currentTarget, async () => { await api('DELETE', `/api/servers/${id}/secrets/${encodeURIComponent(r.key)}`); loadSection(details); }) }, 'Delete'))))))
          : h('p', { class: 'note' }, 'No secrets. They are encrypted at rest and passed to the server as environment variables.'),
        form);
    }
  } catch (e) {
    body.replaceChildren(h('p', { class: 'error-text' }, e.message));
  }
}

// A server's tool overrides (what the agent sees instead of a tool's own name and description) and a form to set
// one; a set override withholds the tool until it is approved with it (Approvals).
async function loadOverrides(details, id, body) {
  const s = state.servers.find((x) => String(x.id) === String(id));
  const rows = await api('GET', `/api/tools/overrides?server=${encodeURIComponent(s ? s.name : id)}`);
  const shown = new Set(rows.map((r) => r.shown_as));
  const own = [...rows.map((r) => r.tool), ...(s ? s.tools.map((t) => t.name).filter((n) => !shown.has(n)) : [])];
  const tool = h('select', { 'aria-label': 'Tool to override' }, ...[...new Set(own)].map((n) => h('option', { value: n }, n)));
  const name = h('input', { placeholder: 'new name', 'aria-label': 'New tool name', autocomplete: 'off' });
  const description = h('input', { placeholder: 'new description', 'aria-label': 'New tool description', autocomplete: 'off' });
  const form = h('form', { class: 'row override-form' }, tool, name, description, h('button', { type: 'submit' }, 'Save override'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const o = {};
    if (name.value.trim()) o.name = name.value.trim();
    if (description.value.trim()) o.description = description.value.trim();
    act(form.querySelector('button'), async () => {
      await api('PUT', `/api/servers/${id}/tools/${encodeURIComponent(tool.value)}/override`, o);
      toast(`${tool.value}: override saved; approve it under Approvals`);
      loadSection(details);
    });
  });
  body.replaceChildren(
    rows.length
      ? h('table', { class: 'mini' }, h('tbody', {}, rows.map((r) => h('tr', { 'data-override': r.tool },
        h('td', {}, h('code', {}, r.tool)), h('td', {}, '→ ', h('code', {}, r.shown_as)),
        h('td', { class: 'note' }, r.override.description || ''),
        h('td', {}, h('span', { class: `pill override-${r.status}` }, r.status)),
        h('td', {}, h('button', { type: 'button', class: 'ghost danger', 'aria-label': `Clear override of ${r.tool}`,
          onclick: (e) => act(e.currentTarget, async () => { await api('DELETE', `/api/servers/${id}/tools/${encodeURIComponent(r.tool)}/override`); loadSection(details); }) }, 'Clear'))))))
      : h('p', { class: 'note' }, 'No overrides: the agent sees each tool as the server describes it.'),
    form);
}

// A server's limits: rate, concurrency and breaker with their state, a form that changes them (each field filled in
// replaces that setting: `10/s`, `off`, `5/30s`), and a button that closes an open breaker.
function limitsView(v, id, details) {
  const st = v.settings || {};
  const rate = (r) => (r ? `${r.count}/${r.per_ms} ms${r.burst ? ` · burst ${r.burst}` : ''}` : 'none');
  const b = v.breaker || {};
  const rows = [
    ['Rate', rate(st.rate) + (v.tokens !== undefined ? ` (${v.tokens} tokens now)` : '')],
    ['Each tool', rate(st.tool_rate)],
    ['Each caller', rate(st.caller_rate)],
    ...Object.entries(st.tools || {}).map(([t, r]) => [`Tool ${t}`, rate(r)]),
    ['Concurrency', st.concurrency ? `${st.concurrency} at once · queue ${st.queue} · wait ${st.wait_ms} ms` + (v.concurrency ? ` (${v.concurrency.in_flight} in flight, ${v.concurrency.waiting} waiting)` : '') : 'no cap'],
    ['Breaker', st.breaker ? `${b.state} · ${st.breaker.failures} failures in ${st.breaker.window_ms} ms, cool-down ${st.breaker.cooldown_ms} ms` + (b.retry_after_ms !== undefined ? ` · trial in ${b.retry_after_ms} ms` : '') : 'off'],
    ['Refused', `${v.refused.rate_limited} rate limited · ${v.refused.server_busy} busy · ${v.refused.server_unavailable} unavailable`],
  ];
  const field = (name, placeholder) => h('input', { name, placeholder, 'aria-label': name, autocomplete: 'off', size: 8 });
  const inputs = [field('rate', '10/s'), field('burst', '20'), field('concurrency', '1'), field('breaker', '5/30s'), field('cooldown', '30s')];
  const form = h('form', { class: 'secret-form', dataset: { role: 'limits-form' } }, ...inputs, h('button', { type: 'submit' }, 'Set limits'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(form.querySelector('button'), async () => {
      const body = {};
      for (const i of inputs) {
        const val = i.value.trim();
        if (!val) continue;
        body[i.name] = i.name === 'burst' ? Number(val) : val;
      }
      await api('PUT', `/api/servers/${id}/limits`, body);
      toast('limits set; they apply to the next call');
      loadSection(details);
    });
  });
  const out = [h('table', { class: 'mini', dataset: { role: 'limits' } }, h('tbody', {}, rows.map(([k, val]) => h('tr', {}, h('td', {}, k), h('td', {}, val))))), form];
  if (b.state === 'open' || b.state === 'half_open') {
    out.push(h('button', { type: 'button', class: 'ghost', onclick: (e) => act(e.currentTarget, async () => { await api('POST', `/api/servers/${id}/limits/reset`); loadSection(details); }) }, 'Close breaker'));
  }
  return out;
}

// Add-server form.
const addForm = $('#add-form');
function closeAddForm() {
  addForm.hidden = true;
  $('#add-toggle').setAttribute('aria-expanded', 'false');
  $('#add-toggle').focus();
}
$('#add-toggle').addEventListener('click', () => {
  addForm.hidden = !addForm.hidden;
  $('#add-toggle').setAttribute('aria-expanded', String(!addForm.hidden));
  if (!addForm.hidden) addForm.elements.name.focus();
});
$('#add-cancel').addEventListener('click', closeAddForm);
addForm.elements.transport.addEventListener('change', () => {
  const remote = addForm.elements.transport.value !== 'stdio';
  for (const el of addForm.querySelectorAll('[data-for="stdio"]')) el.hidden = remote;
  for (const el of addForm.querySelectorAll('[data-for="remote"]')) el.hidden = !remote;
});
addForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const f = addForm.elements;
  const lines = (v) => v.split('\n').map((l) => l.trim()).filter(Boolean);
  const env = {};
  for (const l of lines(f.env.value)) {
    const i = l.indexOf('=');
    if (i > 0) env[l.slice(0, i).trim()] = l.slice(i + 1);
  }
  const remote = f.transport.value !== 'stdio';
  const body = {
    name: f.name.value.trim(),
    transport: f.transport.value,
    description: f.description.value.trim(),
    env,
    tags: f.tags.value.split(',').map((t) => t.trim()).filter(Boolean),
    ...(remote ? { url: f.url.value.trim() } : { command: f.command.value.trim(), args: lines(f.args.value) }),
  };
  const error = addForm.querySelector('.form-error');
  error.textContent = '';
  act(addForm.querySelector('button[type="submit"]'), async () => {
    try {
      const s = await api('POST', '/api/servers', body);
      toast(`${s.name} registered`);
      addForm.reset();
      closeAddForm();
    } catch (err) {
      error.textContent = err.message;
    }
  });
});

// ---------- logs ----------

function addLog(entry, live) {
  if (state.logIds.has(entry.id)) return;
  state.logIds.add(entry.id);
  state.logs.unshift(entry);
  state.logs.sort((a, b) => b.id - a.id);
  if (state.logs.length > 500) state.logIds.delete(state.logs.pop().id);
  renderLogs(live ? entry.id : null);
}

function renderLogFilter() {
  const sel = $('#log-server');
  const names = [...new Set([...state.servers.map((s) => s.name), ...state.logs.map((l) => l.server)])].sort();
  const current = sel.value;
  sel.replaceChildren(h('option', { value: '' }, 'All servers'), ...names.map((n) => h('option', { value: n, selected: n === current }, n)));
}

const openLogs = new Set();

// The guards' decisions on a call, from the call log's notes (`[guard: arguments blocked (github_token at token)] `):
// one pill each, the full note as its title.
function guardPills(response) {
  const pills = [];
  for (const m of String(response || '').matchAll(/\[guard: (\w+) (\w+) \(([^)]*)\)\] /g)) {
    const [, guard, action, found] = m;
    pills.push(' ', h('span', { class: `pill guard guard-${action}`, title: `${guard} ${action}: ${found}` }, `${guard.replace('_', ' ')} ${action}`));
  }
  return pills;
}

function renderLogs(freshId = null) {
  const server = $('#log-server').value;
  const status = $('#log-status').value;
  const rows = state.logs.filter((l) => (!server || l.server === server) && (!status || (status === 'ok') === l.success));
  $('#count-logs').textContent = String(state.logs.length);
  $('#log-empty').hidden = rows.length > 0;
  const tbody = $('#log-rows');
  tbody.replaceChildren();
  for (const l of rows) {
    const tr = h('tr', { class: 'entry', tabindex: 0, dataset: { id: String(l.id) }, 'aria-expanded': String(openLogs.has(l.id)) },
      h('td', {}, fmtTime(l.timestamp)), h('td', {}, l.server),
      // Who made the call (issue 30: a team's front that validates OAuth tokens), by the `sub` part of issuer#sub.
      h('td', {}, h('code', {}, l.tool), l.user && h('small', { class: 'note', title: l.user }, ` by ${l.user.split('#').pop()}`)),
      h('td', { class: l.success ? 'ok' : 'fail' }, l.success ? 'ok' : 'failed', ...guardPills(l.response)), h('td', { class: 'num' }, `${l.latency_ms} ms`));
    if (l.id === freshId) tr.classList.add('fresh');
    const toggle = () => { if (openLogs.has(l.id)) openLogs.delete(l.id); else openLogs.add(l.id); renderLogs(); $(`#log-rows tr[data-id="${l.id}"]`).focus(); };
    tr.addEventListener('click', toggle);
    tr.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); } });
    tbody.append(tr);
    if (openLogs.has(l.id)) {
      tbody.append(h('tr', { class: 'detail' }, h('td', { colspan: 5 },
        l.user && h('div', { class: 'note' }, `Called by ${l.user}${l.client ? ` with client ${l.client}` : ''}${l.replica ? ` through ${l.replica}` : ''}`),
        h('div', { class: 'note' }, 'Arguments'), h('pre', {}, JSON.stringify(l.args, null, 2)),
        h('div', { class: 'note' }, 'Response'), h('pre', {}, l.response))));
    }
  }
}
$('#log-server').addEventListener('change', () => renderLogs());
$('#log-status').addEventListener('change', () => renderLogs());
$('#log-clear').addEventListener('click', (e) => act(e.currentTarget, async () => {
  await api('DELETE', '/api/logs');
  toast('call log cleared');
}));

async function loadLogs() {
  try {
    const page = await api('GET', '/api/logs?limit=500');
    for (const entry of page.entries.reverse()) addLog(entry, false);
  } catch (e) { toast(`cannot load the call log: ${e.message}`, true); }
}

// ---------- test panel ----------

let testForm = null;

function renderTestPickers() {
  const serverSel = $('#test-server');
  const withTools = state.servers.filter((s) => s.tools.length);
  if (!state.testServer || !withTools.some((s) => s.name === state.testServer)) {
    state.testServer = (withTools.find((s) => s.running) || withTools[0] || {}).name || '';
  }
  serverSel.replaceChildren(...withTools.map((s) => h('option', { value: s.name, selected: s.name === state.testServer },
    s.running ? s.name : `${s.name} (not running)`)));
  if (!withTools.length) serverSel.append(h('option', { value: '' }, 'no server with known tools'));
  const s = withTools.find((x) => x.name === state.testServer);
  const tools = s ? s.tools : [];
  if (!tools.some((t) => t.name === state.testTool)) state.testTool = tools[0] ? tools[0].name : '';
  const toolSel = $('#test-tool');
  const before = toolSel.value;
  toolSel.replaceChildren(...tools.map((t) => h('option', { value: t.name, selected: t.name === state.testTool }, t.name)));
  const note = $('#test-note');
  note.replaceChildren();
  if (s && !s.running) {
    note.append('Not running in this process. ',
      h('button', { type: 'button', onclick: (e) => act(e.currentTarget, () => activate(s)) }, `Activate ${s.name}`));
  }
  $('#test-call').disabled = !(s && s.running && state.testTool);
  if (before !== state.testTool || !testForm || testForm.server !== state.testServer) renderTestForm();
}

function renderTestForm() {
  const s = state.servers.find((x) => x.name === state.testServer);
  const tool = s && s.tools.find((t) => t.name === state.testTool);
  $('#test-description').textContent = tool ? tool.description || '' : '';
  testForm = tool ? { ...buildForm(tool.input_schema, $('#test-fields')), server: s.name, tool: tool.name } : null;
  if (!tool) $('#test-fields').replaceChildren(h('p', { class: 'note' }, 'Pick a server and a tool. A server shows its tools once it has been activated.'));
}

$('#test-server').addEventListener('change', (e) => { state.testServer = e.target.value; state.testTool = ''; renderTestPickers(); });
$('#test-tool').addEventListener('change', (e) => { state.testTool = e.target.value; renderTestForm(); });
$('#test-raw').addEventListener('change', () => showResult(lastResult));
$('#test-form').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); $('#test-form').requestSubmit(); }
});

let lastResult = null;

function showResult(r) {
  if (!r) return;
  $('#test-result').hidden = false;
  const outcome = $('#test-outcome');
  if (r.error) {
    outcome.textContent = `Request failed (${r.error.code || r.error.status})`;
    outcome.className = 'fail';
    $('#test-output').textContent = r.error.message;
  } else {
    const failed = r.result.isError === true;
    outcome.textContent = failed ? 'Tool returned an error' : 'Success';
    outcome.className = failed ? 'fail' : 'ok';
    const pretty = (r.result.content || []).map((c) => {
      if (c.type === 'text') return c.text;
      if (c.type === 'image' || c.type === 'audio') return `[${c.type} ${c.mimeType}, ${Math.round((c.data || '').length * 0.75)} bytes]`;
      if (c.type === 'resource') return `[resource ${c.resource && c.resource.uri}]\n${(c.resource && c.resource.text) || ''}`;
      if (c.type === 'resource_link') return `[link ${c.uri}]`;
      return JSON.stringify(c, null, 2);
    }).join('\n\n');
    $('#test-output').textContent = $('#test-raw').checked ? JSON.stringify(r.result, null, 2)
      : pretty || (r.result.structuredContent ? JSON.stringify(r.result.structuredContent, null, 2) : '(empty result)');
  }
  $('#test-latency').textContent = `${r.ms} ms`;
}

$('#test-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const error = $('#test-form .form-error');
  error.textContent = '';
  if (!testForm) return;
  const args = testForm.read();
  if (!args.ok) { error.textContent = args.error; return; }
  const s = state.servers.find((x) => x.name === testForm.server);
  act($('#test-call'), async () => {
    const started = performance.now();
    try {
      const result = await api('POST', `/api/servers/${s.id}/call`, { tool: testForm.tool, args: args.value });
      lastResult = { result, ms: Math.round(performance.now() - started) };
    } catch (err) {
      lastResult = { error: { message: err.message, code: err.code, status: err.status }, ms: Math.round(performance.now() - started) };
    }
    showResult(lastResult);
  });
});

// ---------- browse ----------

let browseTimer = null;
let browseSeq = 0;

/** Whether a marketplace row is registered already (by package, or by name). */
function isInstalled(item) {
  const packages = new Set(item.packages || []);
  const short = String(item.name).split('/').pop();
  return state.servers.some((s) => (s.package_name && packages.has(s.package_name)) || s.name === short);
}

/** Installs a marketplace row; when it needs values (API keys, settings), asks for them in the row and retries. */
async function install(item, row, inputs = {}) {
  const r = await api('POST', '/api/install', { name: item.key, inputs });
  const actions = row.querySelector('.actions');
  if (r.status === 'installed') {
    actions.replaceChildren(h('span', { class: 'ok' }, `installed as ${r.server}`));
    toast(`${r.server} installed${r.warming ? '; downloading its package in the background' : ''}; activate it under Servers`);
    return;
  }
  // needs_input: one field per missing value, secrets as password fields.
  const fields = r.missing.map((m) => h('label', {},
    `${m.name}${m.is_secret ? ' (secret, stored encrypted)' : ''}`,
    h('input', { name: m.name, type: m.is_secret ? 'password' : 'text', required: true, autocomplete: 'off', 'aria-describedby': `${item.key}-${m.name}` }),
    h('span', { class: 'help', id: `${item.key}-${m.name}` }, m.description || '')));
  const form = h('form', { class: 'form-grid', 'aria-label': `Values ${item.name} needs` }, ...fields,
    h('div', { class: 'wide row' }, h('button', { type: 'submit', class: 'primary' }, 'Install'), h('span', { class: 'note' }, 'This server needs these values to start.')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const values = { ...inputs };
    for (const el of form.querySelectorAll('input')) values[el.name] = el.value;
    act(form.querySelector('button'), () => install(item, row, values));
  });
  actions.replaceChildren(form);
  form.querySelector('input').focus();
}

async function browse(query) {
  const mine = ++browseSeq;
  const list = $('#browse-list');
  list.replaceChildren(h('p', { class: 'note' }, 'Searching…'));
  try {
    const r = await api('GET', `/api/browse?query=${encodeURIComponent(query)}&limit=30`);
    if (mine !== browseSeq) return;
    const failed = (r.sources || []).filter((x) => !x.ok);
    const rows = (r.servers || []).map((item) => {
      const row = h('article', { class: 'card browse-item', 'aria-label': item.title || item.name, dataset: { key: item.key } },
        h('div', { class: 'server-head' }, h('h2', {}, item.title || item.name), item.version ? h('span', { class: 'pill' }, item.version) : null,
          h('span', { class: 'tag' }, item.source), item.runtime ? h('span', { class: 'tag' }, item.runtime) : null),
        item.title ? h('div', { class: 'meta' }, item.name) : null,
        h('p', { class: 'description' }, item.description || ''),
        item.repository ? h('a', { href: item.repository, target: '_blank', rel: 'noopener noreferrer' }, item.repository) : null,
        h('div', { class: 'actions' }));
      const actions = row.querySelector('.actions');
      if (isInstalled(item)) actions.append(h('span', { class: 'ok' }, 'installed'));
      else if (!item.install_method) actions.append(h('span', { class: 'note' }, 'no supported install method (npx, uvx, docker or a remote URL)'));
      else actions.append(h('button', { type: 'button', class: 'primary', 'aria-label': `Install ${item.name}`,
        onclick: (e) => act(e.currentTarget, () => install(item, row)) }, `Install (${item.install_method})`));
      return row;
    });
    list.replaceChildren(
      ...failed.map((f) => h('p', { class: 'note' }, `${f.source}: ${f.error || 'unavailable'}${f.stale ? ' (showing cached results)' : ''}`)),
      ...(rows.length ? rows : [h('p', { class: 'empty' }, 'Nothing found.')]));
  } catch (e) {
    if (mine !== browseSeq) return;
    list.replaceChildren(h('p', { class: 'empty' }, `Search failed: ${e.message}`));
  }
}
$('#browse-search').addEventListener('input', (e) => {
  clearTimeout(browseTimer);
  const q = e.target.value.trim();
  browseTimer = setTimeout(() => browse(q), 350);
});

async function loadPrereqs() {
  try {
    const p = await api('GET', '/api/prereqs');
    const hints = { npx: 'Node.js (for npm packages)', uvx: 'uv (for Python packages)', docker: 'Docker (for container images)' };
    const missing = Object.keys(hints).filter((k) => p[k] === false);
    const banner = $('#prereqs');
    banner.hidden = !missing.length;
    banner.textContent = missing.length
      ? `Missing on this machine: ${missing.map((k) => `${k} — install ${hints[k]}`).join('; ')}. Servers that need them will fail to start.`
      : '';
  } catch { /* no marketplace in this build: no banner */ }
}

// ---------- approvals (tool pinning) ----------

function show(v) {
  if (v === null || v === undefined) return '(none)';
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}

function pinCard(p) {
  const rows = (p.changes || []).map((c) => h('tr', {},
    h('th', { scope: 'row' }, c.field),
    h('td', {}, h('pre', { class: 'diff-old' }, show(c.approved))),
    h('td', {}, h('pre', { class: 'diff-new' }, show(c.current)))));
  const approve = h('button', { type: 'button', class: 'primary',
    onclick: (e) => act(e.currentTarget, async () => {
      await api('POST', `/api/servers/${encodeURIComponent(p.server)}/tools/approve`, { tool: p.tool });
      toast(`approved ${p.server}__${p.tool}`);
      loadPending();
    }) }, 'Approve');
  const status = { new: 'new tool', changed: 'changed since approval', flagged: 'flagged by the scanner' }[p.status] || p.status;
  // The scanner's findings: rule, severity, where, and the excerpt with hidden characters made visible.
  const findings = (p.findings || []).map((f) => h('li', { class: `finding ${f.severity}` },
    h('strong', {}, f.rule), ` (${f.severity}) at `, h('code', {}, f.field), ': ', h('span', { class: 'excerpt' }, f.excerpt)));
  return h('article', { class: 'card pin', 'data-tool': `${p.server}__${p.tool}` },
    h('header', { class: 'row' }, h('strong', {}, `${p.server}__${p.tool}`),
      h('span', { class: 'pill' }, status), approve),
    findings.length ? h('ul', { class: 'findings' }, ...findings) : null,
    rows.length
      ? h('table', { class: 'diff' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Approved'), h('th', { scope: 'col' }, 'Now'))),
        h('tbody', {}, ...rows))
      : h('p', { class: 'note' }, 'Never approved: everything about it is new.'));
}

let pendingLoad = null;
async function loadPending() {
  if (!routes['/api/tools/pending']) return;
  // One request at a time; snapshots may come in bursts.
  if (pendingLoad) return pendingLoad;
  pendingLoad = (async () => {
    try {
      const list = await api('GET', '/api/tools/pending');
      state.pendingTools = list.length;
      $('#count-pins').textContent = String(list.length + state.approvals.length);
      $('#pin-empty').hidden = list.length > 0;
      $('#pin-list').replaceChildren(...list.map(pinCard));
    } catch (e) { toast(`cannot read pending tools: ${e.message}`, true); } finally { pendingLoad = null; }
  })();
  return pendingLoad;
}

// ---------- introspection (batch results) ----------

async function loadIntrospections() {
  if (!routes['/api/introspections']) return;
  try {
    const r = await api('GET', '/api/introspections');
    $('#introspections').hidden = r.total === 0;
    $('#introspection-counts').textContent = Object.entries(r.categories)
      .sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c}: ${n}`).join(' · ');
    $('#introspection-rows').replaceChildren(...r.records.slice(0, 200).map((x) => h('tr', { 'data-category': x.category },
      h('td', {}, x.package), h('td', {}, x.version || '–'), h('td', {}, h('span', { class: 'pill' }, x.category)),
      h('td', {}, String(x.tool_count)), h('td', { title: x.hint }, x.evidence))));
  } catch (e) { toast(`cannot read introspection results: ${e.message}`, true); }
}

// ---------- agents (#15): A2A agents with their last probed status ----------

async function loadAgents() {
  if (!routes['/api/agents']) return;
  try {
    const r = await api('GET', '/api/agents');
    $('#agents').hidden = r.agents.length === 0;
    $('#agent-rows').replaceChildren(...r.agents.map((a) => h('tr', { 'data-status': a.status },
      h('td', { title: a.description || '' }, a.id), h('td', { title: a.lastError || '' }, h('span', { class: 'pill' }, a.status)),
      h('td', {}, (a.capabilities || []).join(', ')), h('td', {}, a.protocolVersion || '–'), h('td', {}, a.source || ''))));
  } catch (e) { toast(`cannot read agents: ${e.message}`, true); }
}

// ---------- profiles (`profiles.js`) ----------

const loadProfiles = initProfiles({ api, toast, act });
const loadSaved = initSavedScripts({ api, toast, act });

// ---------- policies (`policies.js`) ----------

const loadPolicies = initPolicies({ api, toast, act });

// ---------- start ----------

// Which optional routes this build serves (the marketplace may be absent).
let routes = {};

const initial = location.hash.slice(1);
showTab(TABS.includes(initial) ? initial : 'servers', false);
connect();
loadLogs();
api('GET', '/api/openapi.json').then((doc) => {
  routes = doc.paths || {};
  if (routes['/api/prereqs']) loadPrereqs();
  loadPending();
  loadIntrospections();
  loadAgents();
  if (!routes['/api/browse']) {
    $('#browse-search').disabled = true;
    $('#browse-list').replaceChildren(h('p', { class: 'empty' }, 'Marketplace search is not available in this build of agent-discover.'));
  }
}).catch((e) => toast(`cannot read the API description: ${e.message}`, true));

// ---------- search mode (issue 13): hybrid or BM25, and the local model's download progress ----------

async function loadSearchMode() {
  let again = false;
  try {
    const st = await api('GET', '/api/status');
    const s = st.search || {};
    const d = s.model_download || {};
    const el = $('#search-mode');
    let text = s.hybrid ? 'search: hybrid' : 'search: BM25';
    if (d.state === 'downloading') {
      const mb = (n) => Math.round(n / 1e6);
      text += ` · model ${mb(d.bytes)}${d.total ? ` / ${mb(d.total)}` : ''} MB`;
    } else if (d.state === 'waiting' || d.state === 'verifying') {
      text += ` · model ${d.state}`;
    }
    el.textContent = text;
    el.title = s.fallback_reason || '';
    el.dataset.state = s.hybrid ? 'live' : (d.state === 'failed' ? 'down' : 'connecting');
    el.hidden = false;
    again = ['waiting', 'downloading', 'verifying'].includes(d.state) && !s.hybrid;
  } catch { again = false; }
  if (again) setTimeout(loadSearchMode, 2000);
}
loadSearchMode();
