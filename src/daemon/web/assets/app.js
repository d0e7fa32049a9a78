// hetpool dashboard: a small single-page app over hetpoold's JSON API (/api/..., the same
// authentication and roles as gRPC). No framework, no CDN: this file and style.css are all.
'use strict';

const view = document.getElementById('view');
const TOKEN_KEY = 'hetpool-token';
let refreshTimer = null;

// ---- API --------------------------------------------------------------------------------------
class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  const text = await res.text();
  if (!res.ok) {
    let body = {};
    try { body = JSON.parse(text); } catch (e) { body = { message: text }; }
    throw new ApiError(res.status, body.code || String(res.status), body.message || res.statusText);
  }
  const type = res.headers.get('Content-Type') || '';
  return type.startsWith('application/json') ? JSON.parse(text || '{}') : text;
}

// ---- DOM helpers (no innerHTML with data: everything is text) ---------------------------------
// Control characters but newline and tab written out, as hetpoolctl shows them
// (src/common/terminal_text.h): a job's output or a name cannot hide text or pass bytes on to
// whatever the reader copies it into.
function shown(text) {
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => {
    const code = c.charCodeAt(0);
    if (c === '\r') return '\\r';
    return (code < 0x80 ? '\\x' : '\\u00') + code.toString(16).padStart(2, '0');
  });
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(shown(String(child))));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function table(headers, rows, attrs = {}) {
  return el('table', attrs, el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
            el('tbody', {}, rows.map((r) => el('tr', r.attrs || {}, r.cells.map((c) => el('td', {}, c))))));
}

const stateName = (s) => (s || 'JOB_STATE_PENDING').replace('JOB_STATE_', '');
const nodeState = (s) => (s || 'NODE_STATE_UNSPECIFIED').replace('NODE_STATE_', '');
const linkKind = (k) => (k || 'LINK_KIND_UNSPECIFIED').replace('LINK_KIND_', '').toLowerCase();
const gib = (mib) => (Number(mib || 0) / 1024).toFixed(0) + ' GiB';
const when = (ts) => (ts ? new Date(ts).toLocaleString() : '-');
const jobLink = (id) => el('a', { href: '#/jobs/' + id }, id);

function placementText(job) {
  return (job.placement || []).map((p) =>
    p.node + (p.device_ids ? '[' + p.device_ids.join(',') + ']' : '') +
    (p.device_milli && p.device_milli < 1000 ? ' ' + p.device_milli / 10 + '%' : '')).join(' ') || '-';
}

function pendingText(job) {
  const w = job.pending;
  if (!w || stateName(job.state) !== 'PENDING') return job.message || '';
  const parts = [w.never_fits ? 'can never run in this pool' : 'waiting for capacity'];
  if (w.needs) parts.push('needs ' + w.needs);
  if (w.closest) parts.push('closest: ' + w.closest);
  if (w.quota) parts.push(w.quota);
  if (w.held_for_it) parts.push('holding ' + w.held_for_it + ' (first in line)');
  return parts.join('; ');
}

// ---- Pages ------------------------------------------------------------------------------------
async function overviewPage() {
  const [nodes, devices, classes] = await Promise.all([api('/api/nodes'), api('/api/devices'), api('/api/fingerprints')]);
  const byVendor = {};
  for (const d of devices.devices || []) {
    const vendor = d.device.vendor;
    const v = byVendor[vendor] || (byVendor[vendor] = { total: 0, used: 0, unhealthy: 0 });
    v.total += 1;
    if (!d.device.healthy) v.unhealthy += 1;
    else if (d.allocated_milli) v.used += Math.min(1000, d.allocated_milli) / 1000;
  }
  const vendorCards = Object.entries(byVendor).sort().map(([vendor, v]) => {
    const usedPct = (100 * v.used) / v.total, badPct = (100 * v.unhealthy) / v.total;
    const bar = el('div', { class: 'bar' }, el('span', { class: 'used' }), el('span', { class: 'bad' }));
    bar.children[0].style.width = usedPct + '%';
    bar.children[1].style.width = badPct + '%';
    return el('div', { class: 'card', 'data-vendor': vendor },
      el('div', { class: 'muted' }, vendor),
      el('div', { class: 'big' }, `${(v.total - v.used - v.unhealthy).toFixed(2).replace(/\.00$/, '')} free / ${v.total}`),
      bar, el('div', { class: 'muted' }, `${v.used.toFixed(2).replace(/\.00$/, '')} in use, ${v.unhealthy} unhealthy`));
  });
  view.replaceChildren(
    el('h1', {}, 'Pool'),
    el('div', { class: 'cards', id: 'vendors' }, vendorCards),
    el('h2', {}, 'Classes of cards'),
    table(['Class', 'Fingerprint', 'Free / total', 'Unhealthy', 'Nodes'],
      (classes.classes || []).map((c) => ({ attrs: { 'data-class': c.fingerprint },
        cells: [c.label, el('code', {}, c.fingerprint), `${c.free || 0} / ${c.total || 0}`, c.unhealthy || 0, (c.nodes || []).join(', ')] }))),
    el('h2', {}, 'Nodes'),
    table(['Node', 'State', 'Cards', 'Labels', 'Running jobs', 'Last report'],
      (nodes.nodes || []).map((n) => ({ attrs: { 'data-node': n.name },
        cells: [el('a', { href: '#/nodes/' + n.name }, n.name),
          el('span', { class: nodeState(n.state) === 'READY' && !n.quarantine && !n.fault ? 'ready' : 'notready',
            title: n.quarantine ? n.quarantine.reason : n.fault || '' },
          nodeState(n.state) + (n.drained ? ' (drained)' : '') + (n.fault ? ' (faulted)' : '') + (n.quarantine ? ' (quarantined)' : '')),
          ((n.inventory || {}).devices || []).length,
          Object.entries(n.labels || {}).map(([k, v]) => k + '=' + v).join(' '),
          (n.running_jobs || []).map(jobLink), when(n.last_heartbeat)] }))));
}

// A card's health in words: its quarantine (since when, why), else its own health and the signals
// its vendor library raised (degraded ones place it last).
function cardHealth(d, view) {
  const q = view && view.quarantine;
  if (q) return el('span', { class: 'notready', 'data-quarantined': d.id }, `quarantined since ${when(q.since)}: ${q.reason}`);
  const signals = (d.signals || []).filter((s) => s.severity !== 'noted').map((s) => `${s.severity}: ${s.what}`);
  if (!d.healthy) return el('span', { class: 'notready' }, d.health_message || 'unhealthy');
  return signals.length ? signals.join('; ') : 'ok';
}

// The node's cards on a circle, joined by their links (NVLink, MetaXLink, MLU-Link, Xe Link,
// PCIe switch), coloured by kind and labelled with the lane count.
async function nodePage(name) {
  const [nodes, devices] = await Promise.all([api('/api/nodes'), api('/api/devices')]);
  const node = (nodes.nodes || []).find((n) => n.name === name);
  if (!node) throw new ApiError(404, 'NOT_FOUND', 'no node ' + name);
  const cards = (node.inventory || {}).devices || [];
  const held = {};
  for (const d of devices.devices || []) if (d.node === name) held[d.device.id] = d;
  const size = 460, cx = size / 2, cy = size / 2, radius = cards.length > 1 ? 160 : 0;
  const pos = {};
  cards.forEach((d, i) => {
    const angle = (2 * Math.PI * i) / Math.max(1, cards.length) - Math.PI / 2;
    pos[d.id] = [cx + radius * Math.cos(angle), cy + radius * Math.sin(angle)];
  });
  const graph = svg('svg', { class: 'topology', width: size, height: size, viewBox: `0 0 ${size} ${size}`, 'data-node': name });
  const drawn = new Set();
  for (const d of cards) {
    for (const link of d.links || []) {
      const peer = link.peer_device_id;
      if (!pos[peer]) continue;
      const key = [d.id, peer].sort().join('|') + linkKind(link.kind);
      if (drawn.has(key)) continue;
      drawn.add(key);
      const [x1, y1] = pos[d.id], [x2, y2] = pos[peer];
      const kind = linkKind(link.kind);
      graph.append(svg('line', { class: 'link link-' + kind, x1, y1, x2, y2, 'data-kind': kind, 'data-from': d.id, 'data-to': peer }));
      graph.append(svg('text', { x: (x1 + x2) / 2 + 4, y: (y1 + y2) / 2 - 4 }, kind + (link.count ? ' x' + link.count : '')));
    }
  }
  for (const d of cards) {
    const [x, y] = pos[d.id];
    const h = held[d.id];
    const status = !d.healthy ? 'unhealthy' : h && h.allocated_to ? 'held' : 'free';
    graph.append(svg('circle', { class: 'device ' + status, cx: x, cy: y, r: 30, 'data-device': d.id }));
    graph.append(svg('text', { x: x - 24, y: y - 2 }, d.id));
    graph.append(svg('text', { x: x - 24, y: y + 12 }, d.model));
  }
  view.replaceChildren(
    el('h1', {}, 'Node ' + name),
    el('p', { class: 'muted' }, `${nodeState(node.state)}${node.drained ? ', drained' : ''}; ${cards.length} cards; address ${node.address || '-'}`),
    node.fault ? el('p', { class: 'notready' }, 'Takes no new work: ' + node.fault) : '',
    node.quarantine ? el('p', { class: 'notready', 'data-quarantine': 'node' },
      `Quarantined since ${when(node.quarantine.since)}: ${node.quarantine.reason}`) : '',
    graph,
    el('h2', {}, 'Cards'),
    table(['Card', 'Model', 'Architecture', 'Memory', 'NUMA', 'PCI', 'Fingerprint', 'Health', 'Held by'],
      cards.map((d) => ({ attrs: { 'data-device': d.id }, cells: [d.id, d.model, d.architecture || '-', gib(d.memory_mib),
        (d.numa_node ?? 0) < 0 ? '-' : (d.numa_node ?? 0), d.pci_bus_id || '-', el('code', {}, d.fingerprint || '-'),
        cardHealth(d, held[d.id]),
        held[d.id] && held[d.id].allocated_to ? held[d.id].allocated_to.split(',').map(jobLink) : '-'] }))));
}

// The newest jobs, a page at a time (the daemon answers newest first); "Older jobs" goes on
// from where the page ended (#/queue/TOKEN, so the page's refresh stays on it).
async function queuePage(pageToken) {
  const list = await api('/api/jobs?limit=200' + (pageToken ? '&page_token=' + encodeURIComponent(pageToken) : ''));
  const jobs = (list.jobs || []).slice();
  const order = { PENDING: 0, SCHEDULED: 1, RUNNING: 2 };
  jobs.sort((a, b) => (order[stateName(a.state)] ?? 3) - (order[stateName(b.state)] ?? 3));
  const older = list.next_page_token
    ? el('a', { id: 'older-jobs', href: '#/queue/' + encodeURIComponent(list.next_page_token) }, 'Older jobs')
    : el('span', {});
  view.replaceChildren(
    el('h1', {}, 'Queue'),
    el('p', { class: 'muted' }, 'Waiting and running jobs first, then the newest; a pending job says why it waits.'),
    table(['Job', 'Name', 'User', 'State', 'Shape', 'Placement', 'Why / what'],
      jobs.map((j) => ({ attrs: { 'data-job': j.id }, cells: [jobLink(j.id), j.spec.name || '', j.spec.user || '',
        el('span', { class: 'state-' + stateName(j.state), 'data-state': stateName(j.state) }, stateName(j.state)),
        shapeText(j), placementText(j), pendingText(j)] })), { id: 'queue' }),
    older);
}

// "2 x 8"; an elastic job's range of nodes, "1-4 x 8".
function shapeText(j) {
  const range = j.spec.elastic_nnodes;
  const nodes = range ? `${range.min}-${range.max}` : `${j.spec.nnodes || 1}`;
  return `${nodes} x ${j.spec.devices_per_node || 0}`;
}

async function jobPage(id) {
  const job = await api('/api/jobs/' + encodeURIComponent(id));
  let logs = '';
  try { logs = await api('/api/jobs/' + encodeURIComponent(id) + '/logs'); } catch (e) { logs = '(' + e.message + ')'; }
  const state = stateName(job.state);
  const spec = job.spec || {};
  const plans = (job.launch_plan || []).map((p) => el('div', {},
    el('h2', {}, `Launch on ${p.node} (node rank ${p.node_rank || 0}, ${p.dist_backend}/${p.torch_device})`),
    el('pre', {}, (p.argv || []).join(' ') + '\n\n' + Object.entries(p.env || {}).sort().map(([k, v]) => k + '=' + v).join('\n'))));
  view.replaceChildren(
    el('h1', {}, 'Job ', el('span', { id: 'job-id' }, job.id)),
    table(['Name', 'User', 'State', 'Reason', 'Generation', 'Placement'], [{ cells: [spec.name || '', spec.user || '',
      el('span', { id: 'job-state', class: 'state-' + state }, state), pendingText(job) || job.reason || '',
      `${job.generation || 0} (restarts ${job.restart_count || 0}/${spec.max_restarts || 0})`, placementText(job)] }]),
    job.plan ? el('p', {}, `Plan: ${job.plan.label}: TP${job.plan.tp} PP${job.plan.pp} DP${job.plan.dp}`) : '',
    ...plans,
    el('h2', {}, 'Events'),
    table(['Time', 'State', 'Reason', 'Message'], (job.events || []).map((e) => ({ cells: [when(e.time), stateName(e.state), e.reason, e.message || ''] })), { id: 'events' }),
    el('h2', {}, 'Logs', el('span', { class: 'muted' }, state === 'RUNNING' || state === 'SCHEDULED' ? ' (live)' : '')),
    el('pre', { id: 'logs' }, logs || '(no output yet)'));
  return ['PENDING', 'SCHEDULED', 'RUNNING'].includes(state);  // keep refreshing while it may change
}

async function planPage() {
  const form = el('form', { class: 'plan', id: 'plan-form' },
    el('label', {}, 'Model', el('input', { name: 'model', value: 'llama-2-70b', size: 14 })),
    el('label', {}, 'Mode', el('select', { name: 'mode' }, el('option', {}, 'train'), el('option', {}, 'infer'))),
    el('label', {}, 'Precision', el('select', { name: 'precision' }, ['bf16', 'fp16', 'fp8', 'fp32', 'int8', 'int4'].map((p) => el('option', {}, p)))),
    el('label', {}, 'Fine-tune (LoRA rank, 0 = full)', el('input', { name: 'lora', value: '0', size: 4 })),
    el('label', {}, 'Tokens', el('input', { name: 'tokens', value: '1e9', size: 8 })),
    el('label', {}, 'Objective', el('select', { name: 'objective' }, ['cost', 'time', 'now'].map((o) => el('option', {}, o)))),
    el('button', { type: 'submit' }, 'Plan'));
  const out = el('div', { id: 'plan-result' });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const f = new FormData(form);
    const workload = { mode: f.get('mode'), precision: f.get('precision'), tokens: Number(f.get('tokens')) };
    if (Number(f.get('lora')) > 0) workload.lora_rank = Number(f.get('lora'));
    const body = { model: { preset: f.get('model') }, workload, objective: f.get('objective') };
    out.replaceChildren(el('p', { class: 'muted' }, 'planning…'));
    try {
      const plan = await api('/api/plan', { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
      const currency = plan.currency || '';
      out.replaceChildren(
        el('p', {}, `${plan.model_name}${plan.family ? ' (' + plan.family + ')' : ''}: ${(Number(plan.total_params) / 1e9).toFixed(2)}B parameters, ${plan.mode} ${plan.precision}, ranked by ${plan.ranked_by || plan.objective}`),
        table(['#', 'Class', 'Cards', 'Layout', 'Memory / card', 'Time', 'Cost', 'Now', 'Note'],
          (plan.plans || []).map((r, i) => ({ attrs: { 'data-feasible': String(!!r.feasible) }, cells: [i + 1, r.label,
            r.feasible ? (r.nodes || 1) * (r.devices_per_node || 1) : '-',
            r.feasible ? `TP${r.tp} PP${r.pp} DP${r.dp}${r.zero_stage ? ' ZeRO-' + r.zero_stage : ''}` : '-',
            r.required_bytes ? (r.required_bytes / 2 ** 30).toFixed(1) + ' GiB' : '-',
            r.total_seconds ? (r.total_seconds / 3600).toFixed(1) + ' h' : '-',
            r.cost ? r.cost.toFixed(0) + ' ' + currency : '-',
            r.available_now ? 'yes' : 'no', r.reason || ''] })), { id: 'plans' }));
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error' }, e.message));
    }
  });
  view.replaceChildren(el('h1', {}, 'What would it take?'),
    el('p', { class: 'muted' }, 'Memory, cards, layout, time and cost per class of cards in this pool (docs/planner.md).'), form, out);
}

async function usagePage() {
  const usage = await api('/api/usage?by=user');
  view.replaceChildren(el('h1', {}, 'Usage, last 7 days'),
    table(['User', 'Group', 'Jobs', 'Card-hours', 'Cost (' + (usage.currency || '') + ')'],
      (usage.rows || []).map((r) => ({ cells: [r.key, r.group || '-', r.jobs, (r.card_hours || 0).toFixed(2), (r.cost || 0).toFixed(2)] }))),
    el('p', { class: 'muted' }, `total ${(usage.total_card_hours || 0).toFixed(2)} card-hours; CSV: hetpoolctl usage -o csv`));
}

// ---- Routing ----------------------------------------------------------------------------------
async function render() {
  clearTimeout(refreshTimer);
  const hash = location.hash.replace(/^#/, '') || '/';
  const [, page, arg] = hash.split('/');
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.nav === (page || 'overview'));
  document.getElementById('login').hidden = true;
  let live = false;
  try {
    if (!page) { await overviewPage(); live = true; }
    else if (page === 'nodes' && arg) { await nodePage(decodeURIComponent(arg)); live = true; }
    else if (page === 'queue') { await queuePage(arg && decodeURIComponent(arg)); live = true; }
    else if (page === 'jobs' && arg) live = await jobPage(decodeURIComponent(arg));
    else if (page === 'plan') await planPage();
    else if (page === 'usage') await usagePage();
    else view.replaceChildren(el('p', { class: 'error' }, 'no such page'));
  } catch (e) {
    if (e.status === 401) {
      document.getElementById('login').hidden = false;
      document.getElementById('login-error').textContent = sessionStorage.getItem(TOKEN_KEY) ? e.message : '';
      view.replaceChildren();
      return;
    }
    view.replaceChildren(el('p', { class: 'error', id: 'error' }, `${e.code || 'ERROR'}: ${e.message}`));
  }
  if (live) refreshTimer = setTimeout(render, 2000);
}

document.getElementById('login-form').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById('token').value.trim());
  render();
});
window.addEventListener('hashchange', render);
render();
