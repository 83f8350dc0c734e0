// Replications: a form for every option `POST /_replicate` and `_replicator` documents take
// (Couchette's extras included: sync pairs, suspended, interval, exclusive, attachments on
// demand, transform), and the `_replicator` documents with their state, next run, suspend,
// resume and delete. Jobs' live states are on the sync dashboard (sync.js).
import { get, post, put, del, docPath } from './api.js';
import { h, show, field, report, notify, checkbox, confirmDialog, errorBox, splitList } from './ui.js';
import { codeEditor, checkJSON } from './editor.js';
import { followJobs, describeEndpoint, stateClass } from './jobfeed.js';

const remote = '\u0000remote';
/** Numbers CouchDB's replicator takes: [option, label]. */
const numbers = [
  ['checkpoint_interval', 'Checkpoint interval (ms)'], ['worker_batch_size', 'Worker batch size'],
  ['worker_processes', 'Worker processes'], ['http_connections', 'HTTP connections'],
  ['connection_timeout', 'Connection timeout (ms)'], ['retries_per_request', 'Retries per request'],
];

export async function replicationScreen(main) {
  let databases = [];
  try { databases = await get('/_all_dbs'); } catch { /* remote URLs still work */ }
  const docsSlot = h('div');
  const formSlot = h('div#replication-result');

  const kind = h('select#replication-kind', {},
    h('option', { value: 'once', text: 'One-shot (POST /_replicate)' }),
    h('option', { value: 'continuous', text: 'Continuous (POST /_replicate)' }),
    h('option', { value: 'persistent', text: 'Persistent (_replicator document)' }),
    h('option', { value: 'sync', text: 'Sync pair, both ways (_replicator document)' }));
  const docId = h('input#replication-doc-id', { type: 'text', autocomplete: 'off', placeholder: 'generated when empty' });
  const persistentContinuous = checkbox('Continuous', { id: 'replication-doc-continuous' });
  const interval = h('input#replication-interval', { type: 'number', min: 1, step: 1, placeholder: 'once' });
  const suspended = checkbox('Start suspended', { id: 'replication-suspended' });
  const exclusive = checkbox('Exclusive (retire this database\'s earlier pairs)', { id: 'replication-exclusive' });
  exclusive.element.hidden = true;
  const persistentFields = h('div.row', { hidden: true }, field('Document ID', docId), persistentContinuous.element,
    field('Run again every (seconds, one-shot)', interval), suspended.element, exclusive.element);
  const source = endpointPicker('source', 'Source', databases);
  const target = endpointPicker('target', 'Target', databases);
  const createTarget = checkbox('Create the target if missing', { id: 'replication-create-target' });
  const createPartitioned = checkbox('… partitioned', { id: 'replication-create-partitioned' });

  // Which documents: all, by ID, by selector, or through a filter function.
  const selection = h('select#replication-selection', {}, [['all', 'All documents'], ['doc_ids', 'These document IDs'],
    ['selector', 'A Mango selector'], ['filter', 'A filter function']].map(([value, text]) => h('option', { value, text })));
  const docIds = h('input#replication-doc-ids', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'a, b, c' });
  const selector = codeEditor({ id: 'replication-selector', label: 'Selector (JSON)', rows: 3, value: '{\n  "type": "note"\n}' });
  const filter = h('input#replication-filter', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'ddoc/name' });
  const queryParams = codeEditor({ id: 'replication-query-params', label: 'query_params (JSON object, optional)', rows: 2, value: '',
    check: (text) => (text.trim() ? checkJSON(text) : null) });
  const idsField = field('Document IDs (comma-separated)', docIds);
  const filterFields = h('div', h('div.row', field('Filter (design document/name)', filter)), queryParams.element);
  const showSelection = () => {
    idsField.hidden = selection.value !== 'doc_ids';
    selector.element.hidden = selection.value !== 'selector';
    filterFields.hidden = selection.value !== 'filter';
  };
  selection.addEventListener('change', showSelection);
  showSelection();

  const sinceSeq = h('input#replication-since-seq', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'from the checkpoint' });
  const useCheckpoints = checkbox('Use checkpoints', { id: 'replication-use-checkpoints', checked: true });
  const winningOnly = checkbox('Winning revisions only', { id: 'replication-winning-revs-only' });
  const onDemand = checkbox('Attachments on demand (a pull from a URL)', { id: 'replication-on-demand' });
  const transform = h('input#replication-transform', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'ddoc/name' });
  const numberInputs = numbers.map(([option, label]) => [option, h('input', { type: 'number', min: 0, step: 1, id: `replication-${option}`, placeholder: 'default' }), label]);

  const form = h('form#replication-form', { 'aria-label': 'Start a replication' },
    h('div.row', field('Kind', kind)), persistentFields,
    h('div.grid2', source.element, target.element),
    h('div.row', createTarget.element, createPartitioned.element),
    h('fieldset.panel', h('legend', { text: 'Which documents' }), h('div.row', field('Replicate', selection), idsField), selector.element, filterFields),
    h('details.panel#replication-more', h('summary', { text: 'More options' }),
      h('div.row', field('Since sequence (since_seq)', sinceSeq), useCheckpoints.element, winningOnly.element, onDemand.element,
        field('Transform (design document/name)', transform)),
      h('div.row', numberInputs.map(([, input, label]) => field(label, input)))),
    h('div.row', h('button.primary', { type: 'submit', text: 'Start replication' })),
    formSlot);
  const persistent = () => ['persistent', 'sync'].includes(kind.value);
  kind.addEventListener('change', () => {
    persistentFields.hidden = !persistent();
    exclusive.element.hidden = kind.value !== 'sync';
  });

  /** The replication's definition, as `_replicate` and `_replicator` read it. */
  function definition() {
    const body = { source: source.value(), target: target.value() };
    if (createTarget.input.checked) {
      body.create_target = true;
      if (createPartitioned.input.checked) body.create_target_params = { partitioned: true };
    }
    if (selection.value === 'doc_ids') body.doc_ids = splitList(docIds.value);
    if (selection.value === 'selector') {
      const problem = selector.check();
      if (problem) throw new Error(`The selector is not JSON: ${problem.message}`);
      body.selector = JSON.parse(selector.value);
    }
    if (selection.value === 'filter') {
      body.filter = filter.value.trim();
      if (queryParams.value.trim()) {
        const problem = queryParams.check();
        if (problem) throw new Error(`query_params is not JSON: ${problem.message}`);
        body.query_params = JSON.parse(queryParams.value);
      }
    }
    if (sinceSeq.value.trim()) body.since_seq = sinceSeq.value.trim();
    if (!useCheckpoints.input.checked) body.use_checkpoints = false;
    if (winningOnly.input.checked) body.winning_revs_only = true;
    if (onDemand.input.checked) body.attachments = 'on_demand';
    if (transform.value.trim()) body.transform = transform.value.trim();
    for (const [option, input] of numberInputs) if (input.value !== '') body[option] = Number(input.value);
    if (kind.value === 'continuous' || (persistent() && persistentContinuous.input.checked)) body.continuous = true;
    if (persistent()) {
      if (kind.value === 'sync') body.sync = true;
      if (kind.value === 'sync' && exclusive.input.checked) body.exclusive = true;
      if (suspended.input.checked) body.suspended = true;
      if (interval.value !== '' && !body.continuous) body.interval = Number(interval.value);
    }
    return body;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let body;
    try { body = definition(); } catch (error) { report(formSlot, error); return; }
    // Credentials leave the form as soon as they are sent: never shown again.
    source.forget(); target.forget();
    report(formSlot, null);
    try {
      if (!persistent()) {
        show(formSlot, h('p.muted', { text: body.continuous ? 'Starting…' : 'Replicating…' }));
        const answer = await post('/_replicate', body);
        show(formSlot, h('p#replication-outcome', answer.ok ? h('span.badge.good', { text: 'ok' }) : null, ' ',
          answer.no_changes ? 'Nothing to replicate.' : answer.history
            ? `Done: ${answer.history[0]?.docs_written ?? 0} documents written, ${answer.history[0]?.doc_write_failures ?? 0} failures.`
            : `Started (${answer._local_id || answer.id || ''}): see the `, answer.history || answer.no_changes ? null : h('a', { href: '#/sync', text: 'sync dashboard' })));
      } else {
        const answer = docId.value ? await put(docPath('_replicator', docId.value), body) : await post('/_replicator', body);
        show(formSlot, h('p#replication-outcome', h('span.badge.good', { text: 'saved' }), ` as _replicator/${answer.id}; watch it on the `,
          h('a', { href: '#/sync', text: 'sync dashboard' })));
        docId.value = '';
        loadDocuments();
      }
    } catch (error) { report(formSlot, error); }
  });

  show(main, h('h1', { text: 'Replication' }), h('div.panel', form),
    h('h2', { text: 'Persistent replications (_replicator)' }), docsSlot);

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
    const actions = documentActions(doc, () => loadDocuments(), (error) => report(docsSlot, error));
    return h('tr', { dataset: { doc: doc.doc_id, state: doc.state || '' } },
      h('td', h('code', { text: doc.doc_id }), doc.pair_id !== undefined ? h('div.muted', { text: 'sync pair' }) : null),
      h('td', h('code', { text: `${describeEndpoint(doc.source)} → ${describeEndpoint(doc.target)}` })),
      h('td', h('span', { class: `badge ${stateClass(doc.state)}`, text: doc.state || '?' }),
        doc.info?.next_run ? h('div.muted.next-run', { text: `next run ${new Date(doc.info.next_run).toLocaleString()}` }) : null),
      h('td', { text: doc.error_count ? `${doc.error_count}${doc.info && doc.info.error ? `: ${doc.info.error}` : ''}` : '' }),
      h('td', actions));
  }

  // A job's event may change a document's state: read them again (at most every half second).
  let pending = null;
  const stop = followJobs((job) => {
    if (!job.doc_id || pending) return;
    pending = setTimeout(() => { pending = null; loadDocuments(); }, 500);
  }, () => {});
  loadDocuments();
  return () => { stop(); clearTimeout(pending); };
}

/** Suspend or resume (not for finished jobs: nothing to pause) and delete a `_replicator` document. */
export function documentActions(doc, reload, fail) {
  const path = docPath(doc.database || '_replicator', doc.doc_id);
  const suspended = doc.state === 'suspended';
  const finished = ['completed', 'failed'].includes(doc.state);
  const toggle = finished ? null : h('button', { type: 'button', text: suspended ? 'Resume' : 'Suspend', 'aria-label': `${suspended ? 'Resume' : 'Suspend'} ${doc.doc_id}` });
  if (toggle) {
    toggle.addEventListener('click', async () => {
      try {
        const body = await get(path);
        if (suspended) delete body.suspended; else body.suspended = true;
        for (const key of Object.keys(body)) if (key.startsWith('_replication_')) delete body[key];
        await put(path, body);
        notify(`${suspended ? 'Resumed' : 'Suspended'} ${doc.doc_id}`);
        reload();
      } catch (error) { fail(error); }
    });
  }
  const removeLabel = finished ? 'Delete' : 'Stop and delete';
  const remove = h('button.danger', { type: 'button', text: removeLabel, 'aria-label': `${removeLabel} ${doc.doc_id}` });
  remove.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: `Delete _replicator/${doc.doc_id}?`, message: 'Its job stops; the data already copied stays.', confirmLabel: 'Delete it' });
    if (!ok) return;
    try {
      const current = await get(path);
      await del(path, { rev: current._rev });
      reload();
    } catch (error) { fail(error); }
  });
  return [toggle, toggle ? ' ' : null, remove];
}

/** A database picker: this server's databases, or a remote URL with credentials, headers
 *  and TLS settings (`ca_file`, `pinned_public_key`). */
function endpointPicker(name, label, databases) {
  const select = h('select', { id: `${name}-db` }, databases.map((db) => h('option', { value: db, text: db })),
    h('option', { value: remote, text: 'Another server (URL)…' }));
  const newName = h('input', { type: 'text', id: `${name}-new`, autocomplete: 'off', placeholder: 'or type a new local name' });
  const input = (suffix, props = {}) => h('input', { type: 'text', id: `${name}-${suffix}`, autocomplete: 'off', spellcheck: 'false', ...props });
  const url = input('url', { placeholder: 'http://host:5984/db' });
  const user = input('user', { spellcheck: null });
  const password = h('input', { type: 'password', id: `${name}-password`, autocomplete: 'new-password' });
  const headers = input('headers', { placeholder: '{"X-Token": "…"}' });
  const caFile = input('ca-file', { placeholder: '/etc/ssl/peer.pem' });
  const pinned = input('pinned-key', { placeholder: 'sha256//…' });
  const remoteFields = h('div', { hidden: true }, h('div.row', field('URL', url), field('User', user), field('Password', password)),
    h('details', h('summary', { text: 'Headers and TLS' }),
      h('div.row', field('Headers (JSON object)', headers), field('CA file (ca_file)', caFile), field('Pinned public key', pinned))));
  select.addEventListener('change', () => { remoteFields.hidden = select.value !== remote; });
  const element = h('fieldset.panel', h('legend', { text: label }), h('div.row', field(`${label} database`, select), field(`${label}: new local database`, newName)), remoteFields);
  return {
    element,
    value() {
      if (select.value !== remote) return newName.value.trim() || select.value;
      const endpoint = { url: url.value.trim() };
      if (user.value) endpoint.auth = { basic: { username: user.value, password: password.value } };
      if (headers.value.trim()) {
        let parsed;
        try { parsed = JSON.parse(headers.value); } catch (error) { throw new Error(`${label} headers are not JSON: ${error.message}`); }
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${label} headers must be a JSON object`);
        endpoint.headers = parsed;
      }
      if (caFile.value.trim()) endpoint.ca_file = caFile.value.trim();
      if (pinned.value.trim()) endpoint.pinned_public_key = pinned.value.trim();
      return Object.keys(endpoint).length === 1 ? endpoint.url : endpoint;
    },
    /** Secrets leave the form once sent: the password, and headers (they may carry a token). */
    forget() { password.value = ''; headers.value = ''; },
  };
}
