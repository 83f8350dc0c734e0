// Replications: a form to start one (one-shot, continuous, persistent, sync pair) and
// every job live from `_scheduler/jobs?feed=eventsource` (else `_active_tasks`, polled).
import { get, post, put, del, docPath, enc } from './api.js';
import { h, show, field, report, notify, checkbox, confirmDialog, errorBox } from './ui.js';

const remote = '\u0000remote';

export async function replicationScreen(main) {
  let databases = [];
  try { databases = await get('/_all_dbs'); } catch { /* remote URLs still work */ }
  const jobs = new Map();
  const jobsSlot = h('div');
  const docsSlot = h('div');
  const feedState = h('span.badge#jobs-feed', { text: 'connecting' });
  const formSlot = h('div#replication-result');

  const kind = h('select#replication-kind', {},
    h('option', { value: 'once', text: 'One-shot (POST /_replicate)' }),
    h('option', { value: 'continuous', text: 'Continuous (POST /_replicate)' }),
    h('option', { value: 'persistent', text: 'Persistent (_replicator document)' }),
    h('option', { value: 'sync', text: 'Sync pair, both ways (_replicator document)' }));
  const docId = h('input#replication-doc-id', { type: 'text', autocomplete: 'off', placeholder: 'generated when empty' });
  const persistentContinuous = checkbox('Continuous', { id: 'replication-doc-continuous' });
  const persistentFields = h('div.row', { hidden: true }, field('Document ID', docId), persistentContinuous.element);
  const source = endpointPicker('source', 'Source', databases);
  const target = endpointPicker('target', 'Target', databases);
  const createTarget = checkbox('Create the target if missing', { id: 'replication-create-target' });
  const form = h('form#replication-form', { 'aria-label': 'Start a replication' },
    h('div.row', field('Kind', kind)), persistentFields,
    h('div.grid2', source.element, target.element),
    h('div.row', createTarget.element, h('button.primary', { type: 'submit', text: 'Start replication' })),
    formSlot);
  kind.addEventListener('change', () => { persistentFields.hidden = !['persistent', 'sync'].includes(kind.value); });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { source: source.value(), target: target.value() };
    if (createTarget.input.checked) body.create_target = true;
    // Credentials leave the form as soon as they are sent: never shown again.
    source.forget(); target.forget();
    report(formSlot, null);
    try {
      if (kind.value === 'once' || kind.value === 'continuous') {
        if (kind.value === 'continuous') body.continuous = true;
        show(formSlot, h('p.muted', { text: kind.value === 'once' ? 'Replicating…' : 'Starting…' }));
        const answer = await post('/_replicate', body);
        show(formSlot, h('p#replication-outcome', answer.ok ? h('span.badge.good', { text: 'ok' }) : null, ' ',
          answer.no_changes ? 'Nothing to replicate.' : answer.history
            ? `Done: ${answer.history[0]?.docs_written ?? 0} documents written, ${answer.history[0]?.doc_write_failures ?? 0} failures.`
            : `Started (${answer._local_id || answer.id || ''}).`));
      } else {
        if (persistentContinuous.input.checked) body.continuous = true;
        if (kind.value === 'sync') body.sync = true;
        const answer = docId.value ? await put(docPath('_replicator', docId.value), body) : await post('/_replicator', body);
        show(formSlot, h('p#replication-outcome', h('span.badge.good', { text: 'saved' }), ` as _replicator/${answer.id}`));
        docId.value = '';
        loadDocuments();
      }
    } catch (error) { report(formSlot, error); }
  });

  show(main, h('h1', { text: 'Replication' }), h('div.panel', form),
    h('h2', {}, 'Jobs ', feedState), jobsSlot,
    h('h2', { text: 'Persistent replications (_replicator)' }), docsSlot);

  function renderJobs() {
    const rows = [...jobs.values()].sort((a, b) => String(b.start_time || '').localeCompare(String(a.start_time || '')));
    show(jobsSlot, rows.length ? h('div.table-wrap', h('table#jobs',
      h('thead', h('tr', ['Job', 'Source → target', 'State', 'Progress', 'Last error', 'History', 'Actions'].map((text) => h('th', { scope: 'col', text })))),
      h('tbody', rows.map(jobRow)))) : h('p.muted', { text: 'No replication jobs.' }));
  }

  function jobRow(job) {
    const done = job.state === 'completed';
    const total = Number(job.total) || 0;
    const completed = Number(job.completed) || 0;
    const bar = h('progress', { max: done ? 1 : Math.max(total, 1), value: done ? 1 : completed, 'aria-label': `Progress of ${job.id}` });
    const error = job.last_error ? (typeof job.last_error === 'object' ? `${job.last_error.error}: ${job.last_error.reason}` : String(job.last_error)) : '';
    const history = (job.history || []).slice(0, 6).map((entry) => h('li', { text: `${entry.timestamp || ''} ${entry.type || ''}${entry.reason ? `: ${entry.reason}` : ''}` }));
    const actions = [];
    if (!job.doc_id && !['completed', 'failed', 'removed'].includes(job.state)) {
      actions.push(h('button', { type: 'button', text: 'Stop', 'aria-label': `Stop ${job.id}`, on: { click: async () => {
        try { await post('/_replicate', { replication_id: job.id, cancel: true }); notify(`Stopped ${job.id}`); } catch (e) { report(jobsSlot, e); }
      } } }));
    } else if (job.doc_id) {
      actions.push(h('span.muted', { text: `_replicator/${job.doc_id}` }));
    }
    return h('tr', { dataset: { job: job.id, state: job.state || '' } },
      h('td', h('code', { text: job.id })),
      h('td', h('code', { text: `${describe(job.source)} → ${describe(job.target)}` })),
      h('td', h('span.badge', { class: `badge ${stateClass(job.state)}`, text: job.state || job.status || '?' }), job.status && job.state !== job.status ? h('div.muted', { text: job.status }) : null),
      h('td', bar, h('div.muted', { text: `${completed} / ${total}${job.docs_written !== undefined ? `, ${job.docs_written} written` : ''}` })),
      h('td', { text: error }),
      h('td', history.length ? h('details', h('summary', { text: `${job.history.length} events` }), h('ul', history)) : ''),
      h('td', actions));
  }

  // The live feed; a server without it (or one that drops it) is polled instead.
  let source$ = null;
  let poller = null;
  let received = false;
  function follow() {
    source$ = new EventSource('/_scheduler/jobs?feed=eventsource&heartbeat=15000', { withCredentials: true });
    source$.onopen = () => { feedState.textContent = 'live'; feedState.className = 'badge good'; };
    source$.onmessage = (event) => {
      received = true;
      let job;
      try { job = JSON.parse(event.data); } catch { return; }
      if (!job || !job.id) return;
      jobs.set(job.id, { ...(jobs.get(job.id) || {}), ...job });
      renderJobs();
      if (job.doc_id) loadDocuments();
    };
    source$.onerror = () => {
      if (!received) { source$.close(); source$ = null; startPolling(); return; }
      feedState.textContent = 'reconnecting'; feedState.className = 'badge warn';
    };
  }
  function startPolling() {
    feedState.textContent = 'polling _active_tasks'; feedState.className = 'badge warn';
    const poll = async () => {
      try {
        const tasks = await get('/_active_tasks');
        const seen = new Set();
        for (const task of tasks.filter((t) => t.type === 'replication')) {
          const id = task.replication_id || task.doc_id;
          seen.add(id);
          jobs.set(id, { id, doc_id: task.doc_id, source: task.source, target: task.target, state: 'running',
            status: task.status, completed: task.completed ?? task.docs_read ?? 0,
            total: task.total ?? ((task.docs_read ?? 0) + (task.changes_pending ?? 0)), last_error: task.last_error, docs_written: task.docs_written });
        }
        for (const [id, job] of jobs) if (!seen.has(id) && job.state === 'running') jobs.set(id, { ...job, state: 'ended' });
        renderJobs();
      } catch (error) { show(jobsSlot, errorBox(error)); }
    };
    poll();
    poller = setInterval(poll, 2000);
  }

  let latestLoad = 0;
  async function loadDocuments() {
    // Events start loads that may overlap: only the last one may draw its answer.
    const mine = ++latestLoad;
    try {
      const answer = await get('/_scheduler/docs/_replicator');
      if (mine !== latestLoad) return;
      const rows = (answer.docs || []).map((doc) => documentRow(doc));
      show(docsSlot, rows.length ? h('div.table-wrap', h('table#replicator-docs',
        h('thead', h('tr', ['Document', 'Source → target', 'State', 'Errors', 'Actions'].map((text) => h('th', { scope: 'col', text })))),
        h('tbody', rows))) : h('p.muted', { text: 'No _replicator documents.' }));
    } catch (error) { show(docsSlot, errorBox(error)); }
  }

  function documentRow(doc) {
    const suspended = doc.state === 'suspended';
    const toggle = h('button', { type: 'button', text: suspended ? 'Resume' : 'Suspend', 'aria-label': `${suspended ? 'Resume' : 'Suspend'} ${doc.doc_id}` });
    toggle.addEventListener('click', async () => {
      try {
        const body = await get(docPath('_replicator', doc.doc_id));
        if (suspended) delete body.suspended; else body.suspended = true;
        for (const key of Object.keys(body)) if (key.startsWith('_replication_')) delete body[key];
        await put(docPath('_replicator', doc.doc_id), body);
        notify(`${suspended ? 'Resumed' : 'Suspended'} ${doc.doc_id}`);
        loadDocuments();
      } catch (error) { report(docsSlot, error); }
    });
    const remove = h('button.danger', { type: 'button', text: 'Stop and delete', 'aria-label': `Stop and delete ${doc.doc_id}` });
    remove.addEventListener('click', async () => {
      const ok = await confirmDialog({ title: `Delete _replicator/${doc.doc_id}?`, message: 'Its job stops; the data already copied stays.', confirmLabel: 'Delete it' });
      if (!ok) return;
      try {
        const current = await get(docPath('_replicator', doc.doc_id));
        await del(docPath('_replicator', doc.doc_id), { rev: current._rev });
        loadDocuments();
      } catch (error) { report(docsSlot, error); }
    });
    return h('tr', { dataset: { doc: doc.doc_id, state: doc.state || '' } },
      h('td', h('code', { text: doc.doc_id }), doc.pair_id ? h('div.muted', { text: 'sync pair' }) : null),
      h('td', h('code', { text: `${describe(doc.source)} → ${describe(doc.target)}` })),
      h('td', h('span', { class: `badge ${stateClass(doc.state)}`, text: doc.state || '?' })),
      h('td', { text: doc.error_count ? `${doc.error_count}${doc.info && doc.info.error ? `: ${doc.info.error}` : ''}` : '' }),
      h('td', toggle, ' ', remove));
  }

  renderJobs();
  follow();
  loadDocuments();
  return () => { if (source$) source$.close(); if (poller) clearInterval(poller); };
}

/** A database picker: this server's databases, or a remote URL with credentials. */
function endpointPicker(name, label, databases) {
  const select = h('select', { id: `${name}-db` }, databases.map((db) => h('option', { value: db, text: db })),
    h('option', { value: remote, text: 'Another server (URL)…' }));
  const newName = h('input', { type: 'text', id: `${name}-new`, autocomplete: 'off', placeholder: 'or type a new local name' });
  const url = h('input', { type: 'text', id: `${name}-url`, autocomplete: 'off', spellcheck: 'false', placeholder: 'http://host:5984/db' });
  const user = h('input', { type: 'text', id: `${name}-user`, autocomplete: 'off' });
  const password = h('input', { type: 'password', id: `${name}-password`, autocomplete: 'new-password' });
  const remoteFields = h('div.row', { hidden: true }, field('URL', url), field('User', user), field('Password', password));
  select.addEventListener('change', () => { remoteFields.hidden = select.value !== remote; });
  const element = h('fieldset.panel', h('legend', { text: label }), h('div.row', field(`${label} database`, select), field(`${label}: new local database`, newName)), remoteFields);
  return {
    element,
    value() {
      if (select.value !== remote) return newName.value.trim() || select.value;
      if (!user.value) return url.value.trim();
      return { url: url.value.trim(), auth: { basic: { username: user.value, password: password.value } } };
    },
    forget() { password.value = ''; },
  };
}

function describe(endpoint) {
  if (!endpoint) return '?';
  if (typeof endpoint === 'string') return endpoint;
  return endpoint.url || JSON.stringify(endpoint);
}

function stateClass(state) {
  if (['completed', 'running'].includes(state)) return 'good';
  if (['failed', 'crashing', 'error'].includes(state)) return 'bad';
  if (['pending', 'suspended', 'retired', 'initializing'].includes(state)) return 'warn';
  return '';
}
