// The sync dashboard: every replication, a sync pair's push and pull side by side, each with
// its live state from the scheduler's event feed (running, idle, offline, crashing and why,
// suspended, completed, failed), progress, pending documents, last checkpoint, and the history
// of its state changes seen here (with the scheduler's own events).
import { get, post, enc } from './api.js';
import { h, show, report, notify, seqNumber, errorBox } from './ui.js';
import { followJobs, isRemote, describeEndpoint, jobState, stateClass, errorText } from './jobfeed.js';
import { documentActions } from './replication.js';

const keptTransitions = 30;

export async function syncScreen(main) {
  const feedState = h('span.badge#jobs-feed', { text: 'connecting' });
  const slot = h('div');
  const cards = h('div.sync-cards#sync-cards', { 'aria-live': 'off' });
  show(main, h('h1', {}, 'Sync dashboard ', feedState),
    h('p.muted', { text: 'Every replication, live: a sync pair\'s push and pull side by side. States: running, idle (caught up), offline (a peer cannot be reached; retried every few seconds), crashing (with the reason; retried with back-off), suspended, completed, failed.' }),
    slot, cards);

  const jobs = new Map();          // job ID → its latest event
  const transitions = new Map();   // job ID → [{at, state, reason}], newest first
  const roles = new Map();         // job ID → 'push' | 'pull' for a sync pair's jobs
  const pending = new Map();       // document key → {count, ids} or {error}
  let docs = [];

  function record(job) {
    const state = jobState(job);
    const reason = errorText(job.last_error);
    const list = transitions.get(job.id) || [];
    if (!list.length || list[0].state !== state || (reason && list[0].reason !== reason)) {
      list.unshift({ at: new Date(), state, reason });
      list.length = Math.min(list.length, keptTransitions);
      transitions.set(job.id, list);
    }
  }

  let docsTimer = null;
  async function loadDocuments() {
    try {
      const answer = await get('/_scheduler/docs');
      docs = answer.docs || [];
      for (const doc of docs) {
        if (doc.id) roles.set(doc.id, doc.pair_id !== undefined ? 'push' : 'one');
        if (doc.pair_id) roles.set(doc.pair_id, 'pull');
      }
      report(slot, null);
    } catch (error) { show(slot, errorBox(error)); }
    docs.forEach(loadPending);
    scheduleRender();
  }
  const reloadDocuments = () => { if (!docsTimer) docsTimer = setTimeout(() => { docsTimer = null; loadDocuments(); }, 400); };

  // Pending documents of a push from a local database, read at most once a second per document.
  const pendingLoads = new Map();
  function loadPending(doc) {
    const key = docKey(doc);
    if (isRemote(doc.source) || pendingLoads.has(key)) return;
    pendingLoads.set(key, setTimeout(async () => {
      try {
        const answer = await get(`/_scheduler/docs/${doc.database.split('/').map(enc).join('/')}/${enc(doc.doc_id)}/_pending`);
        pending.set(key, { count: answer.pending.length, ids: answer.pending.slice(0, 8) });
      } catch (error) { pending.set(key, { error: error.message }); }
      pendingLoads.delete(key);
      scheduleRender();
    }, pending.has(key) ? 1000 : 0));
  }

  const stop = followJobs((job) => {
    const merged = { ...(jobs.get(job.id) || {}), ...job };
    jobs.set(job.id, merged);
    record(merged);
    if (merged.doc_id) {
      const doc = docs.find((d) => d.doc_id === merged.doc_id && d.database === merged.database);
      if (!doc || !roles.has(job.id) || doc.state !== job.state) reloadDocuments();
      if (doc) loadPending(doc);
    }
    scheduleRender();
  }, (state) => {
    feedState.textContent = state;
    feedState.className = `badge ${state === 'live' ? 'good' : 'warn'}`;
  });

  let renderTimer = null;
  function scheduleRender() { if (!renderTimer) renderTimer = setTimeout(() => { renderTimer = null; render(); }, 150); }

  function render() {
    // Redrawing must not take the keyboard's place or close what the user opened.
    const active = cards.contains(document.activeElement) ? document.activeElement : null;
    const focused = active?.dataset.focusKey ? `[data-focus-key="${CSS.escape(active.dataset.focusKey)}"]`
      : active?.tagName === 'SUMMARY' ? `details[data-key="${CSS.escape(active.parentElement.dataset.key || '')}"] > summary` : null;
    const opened = new Set([...cards.querySelectorAll('details[open]')].map((d) => d.dataset.key));
    const shownJobs = new Set();
    const groups = docs.map((doc) => {
      const own = [...jobs.values()].filter((job) => job.doc_id === doc.doc_id && job.database === doc.database);
      own.forEach((job) => shownJobs.add(job.id));
      return { key: docKey(doc), doc, jobs: own };
    });
    for (const job of jobs.values()) if (!shownJobs.has(job.id) && !job.doc_id) groups.push({ key: job.id, jobs: [job] });
    show(cards, groups.length ? groups.map((group) => card(group)) : h('p.muted', { text: 'No replications.' }));
    for (const details of cards.querySelectorAll('details')) if (opened.has(details.dataset.key)) details.open = true;
    if (focused) cards.querySelector(focused)?.focus();
  }

  function card({ key, doc, jobs }) {
    // A document's earlier jobs (removed when its definition changed) come after its current ones.
    const own = [...jobs].sort((a, b) => (jobState(a) === 'removed') - (jobState(b) === 'removed'));
    const pair = doc ? doc.pair_id !== undefined : false;
    const sides = [];
    if (pair) {
      const push = own.find((job) => roles.get(job.id) === 'push');
      const pull = own.find((job) => roles.get(job.id) === 'pull');
      sides.push(side('push', `Push: ${describeEndpoint(doc.source)} → ${describeEndpoint(doc.target)}`, push, doc, key));
      sides.push(side('pull', `Pull: ${describeEndpoint(doc.target)} → ${describeEndpoint(doc.source)}`, pull, doc, key));
    } else {
      const job = own[0];
      const source = job?.source ?? doc?.source;
      const target = job?.target ?? doc?.target;
      const direction = isRemote(source) === isRemote(target) ? (isRemote(source) ? 'Between servers' : 'Local copy') : isRemote(source) ? 'Pull' : 'Push';
      sides.push(side(direction === 'Push' ? 'push' : direction === 'Pull' ? 'pull' : 'one',
        `${direction}: ${describeEndpoint(source)} → ${describeEndpoint(target)}`, job, doc, key));
    }
    const title = doc ? `${doc.database === '_replicator' ? '' : `${doc.database}/`}${doc.doc_id}` : `_replicate ${key.slice(0, 12)}…`;
    const kind = pair ? 'sync pair' : doc ? 'persistent' : 'POST /_replicate';
    const actions = doc ? documentActions(doc, loadDocuments, (error) => report(slot, error))
      : own.some((job) => ['running', 'crashing', 'pending'].includes(job.state))
        ? h('button', { type: 'button', text: 'Stop', 'aria-label': `Stop ${key}`, on: { click: async () => {
          try { await post('/_replicate', { replication_id: key, cancel: true }); notify(`Stopped ${key}`); } catch (error) { report(slot, error); }
        } } }) : null;
    for (const button of [actions].flat(2).filter((b) => b instanceof HTMLElement)) button.dataset.focusKey = `${key} ${button.textContent}`;
    return h('article.sync-card', { dataset: { key, doc: doc?.doc_id || '' }, 'aria-labelledby': `card-${cssId(key)}` },
      h('header.row',
        h('h2', { id: `card-${cssId(key)}`, text: title }),
        h('span.badge', { text: kind }),
        doc ? h('span', { class: `badge ${stateClass(doc.state)}`, text: doc.state, title: 'The document\'s state (_scheduler/docs)' }) : null,
        h('span.actions', actions)),
      doc?.info?.next_run ? h('p.next-run', { text: `Runs again at ${new Date(doc.info.next_run).toLocaleString()} (interval)` }) : null,
      h(sides.length > 1 ? 'div.sync-sides.pair' : 'div.sync-sides', sides));
  }

  function side(role, heading, job, doc, key) {
    const state = job ? jobState(job) : (doc?.state || 'unknown');
    const reason = errorText(job?.last_error) || (state === 'crashing' || state === 'failed' ? doc?.info?.error : '');
    const info = job?.info && typeof job.info === 'object' && !job.info.error ? job.info : {};
    const total = Number(job?.total) || 0;
    const completed = Number(job?.completed) || 0;
    const done = state === 'completed';
    const waiting = role !== 'pull' && doc && !isRemote(doc.source) ? pending.get(key) : undefined;
    const history = job ? transitions.get(job.id) || [] : [];
    return h('section.sync-side', { dataset: { role, state, job: job?.id || '' }, 'aria-label': heading },
      h('h3', { text: heading }),
      h('p', h('span', { class: `badge state ${stateClass(state)}`, text: state }),
        reason ? h('span.reason', { text: ` ${reason}` }) : null),
      h('progress', { max: done ? 1 : Math.max(total, 1), value: done ? 1 : completed, 'aria-label': `Progress: ${heading}` }),
      h('dl.facts',
        h('dt', { text: 'Changes' }), h('dd', { text: `${completed} of ${total}` }),
        h('dt', { text: 'Written' }), h('dd', { text: `${info.docs_written ?? '–'} (${info.doc_write_failures ?? 0} failed)` }),
        waiting ? [h('dt', { text: 'Pending documents' }), h('dd.pending', { text: waiting.error ? '–'
          : `${waiting.count}${waiting.count ? `: ${waiting.ids.join(', ')}${waiting.count > waiting.ids.length ? ', …' : ''}` : ''}` })] : null,
        h('dt', { text: 'Last checkpoint' }), h('dd.checkpoint', { text: seqNumber(info.checkpointed_source_seq), title: String(info.checkpointed_source_seq ?? '') }),
        h('dt', { text: 'Source seq' }), h('dd', { text: seqNumber(info.source_seq) })),
      h('details', { dataset: { key: `${key} ${role}` } }, h('summary', { text: `History (${history.length} seen here, ${job?.history?.length || 0} from the scheduler)` }),
        h('ol.history', history.map((entry) => h('li', { dataset: { state: entry.state } },
          h('time', { text: entry.at.toLocaleTimeString() }), ' ', h('span', { class: `badge ${stateClass(entry.state)}`, text: entry.state }),
          entry.reason ? ` ${entry.reason}` : ''))),
        h('ul.history.muted', (job?.history || []).slice(0, 10).map((entry) =>
          h('li', { text: `${entry.timestamp} ${entry.type}${entry.reason ? `: ${entry.reason}` : ''}` })))));
  }

  await loadDocuments();
  return () => { stop(); clearTimeout(renderTimer); clearTimeout(docsTimer); pendingLoads.forEach(clearTimeout); };
}

const docKey = (doc) => `${doc.database}/${doc.doc_id}`;
const cssId = (text) => text.replace(/[^A-Za-z0-9_-]/g, '_');
