// Replication jobs as they change: `_scheduler/jobs?feed=eventsource` (every state change of
// every job, with its `doc_id`), or, from a server that refuses it (Apache CouchDB has no
// such feed), `_active_tasks` polled every two seconds.
import { get } from './api.js';

/**
 * Calls `onJob(job)` with each job as it changes (a `_scheduler/jobs` entry plus `state`,
 * `status`, `completed`, `total`, `last_error`) and `onFeed(state)` with 'live', 'reconnecting',
 * 'polling' or 'failed: …'. Returns a function that stops following.
 */
export function followJobs(onJob, onFeed) {
  let source = new EventSource('/_scheduler/jobs?feed=eventsource&heartbeat=15000', { withCredentials: true });
  let poller = null;
  let received = false;
  source.onopen = () => onFeed('live');
  source.onmessage = (event) => {
    received = true;
    let job;
    try { job = JSON.parse(event.data); } catch { return; }
    if (job && job.id) onJob(job);
  };
  source.onerror = () => {
    // Refused from the start: poll instead. Dropped later: EventSource reconnects by itself.
    if (received) { onFeed('reconnecting'); return; }
    source.close();
    source = null;
    poll();
  };

  const running = new Set();
  function poll() {
    onFeed('polling');
    const once = async () => {
      try {
        const tasks = (await get('/_active_tasks')).filter((task) => task.type === 'replication');
        const seen = new Set();
        for (const task of tasks) {
          const id = task.replication_id || task.doc_id;
          seen.add(id);
          running.add(id);
          onJob({ id, doc_id: task.doc_id ?? null, database: task.database ?? null, source: task.source, target: task.target,
            state: 'running', status: task.status || 'active', last_error: task.last_error ?? null,
            completed: task.completed ?? task.docs_read ?? 0, total: task.total ?? ((task.docs_read ?? 0) + (task.changes_pending ?? 0)),
            info: { docs_read: task.docs_read, docs_written: task.docs_written, doc_write_failures: task.doc_write_failures,
              changes_pending: task.changes_pending, checkpointed_source_seq: task.checkpointed_source_seq, source_seq: task.source_seq } });
        }
        for (const id of running) if (!seen.has(id)) { running.delete(id); onJob({ id, state: 'ended', status: 'stopped' }); }
      } catch (error) { onFeed(`failed: ${error.message}`); }
    };
    once();
    poller = setInterval(once, 2000);
  }

  return () => { if (source) source.close(); if (poller) clearInterval(poller); };
}

/** Whether an endpoint (a name, a URL or `{url, ...}`) is another server's database. */
export function isRemote(endpoint) {
  const url = typeof endpoint === 'string' ? endpoint : endpoint?.url;
  return /^https?:\/\//i.test(url || '');
}

export function describeEndpoint(endpoint) {
  if (!endpoint) return '?';
  if (typeof endpoint === 'string') return endpoint;
  return endpoint.url || JSON.stringify(endpoint);
}

/** What a job shows, in the mobile libraries' words where CouchDB's state says less:
 *  running (active), idle, offline, crashing, pending, suspended, completed, failed, removed. */
export function jobState(job) {
  if (!job) return 'unknown';
  if (job.state === 'running') return job.status === 'idle' ? 'idle' : 'running';
  if (job.state === 'crashing') return job.status === 'offline' ? 'offline' : 'crashing';
  return job.state || job.status || 'unknown';
}

export function stateClass(state) {
  if (['completed', 'running', 'idle'].includes(state)) return 'good';
  if (['failed', 'crashing', 'error'].includes(state)) return 'bad';
  if (['pending', 'suspended', 'retired', 'initializing', 'offline'].includes(state)) return 'warn';
  return '';
}

/** A job's `last_error` ({error, reason} or text) as one line. */
export function errorText(error) {
  if (!error) return '';
  return typeof error === 'object' ? `${error.error}: ${error.reason}` : String(error);
}
