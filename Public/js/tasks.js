// `_active_tasks`: what the server is doing (compactions, index builds, replications),
// refreshed every two seconds, filtered by type.
import { get } from './api.js';
import { h, show, field, errorBox } from './ui.js';

const every = 2000;

export async function tasksScreen(main) {
  const type = h('select#tasks-type', {}, h('option', { value: '', text: 'All' }),
    ['database_compaction', 'view_compaction', 'indexer', 'replication', 'search_indexer'].map((value) => h('option', { value, text: value })));
  const updated = h('span.muted#tasks-updated', { 'aria-live': 'off' });
  const slot = h('div');
  show(main, h('h1', { text: 'Active tasks' }),
    h('div.row', field('Type', type), updated), slot);
  let tasks = [];
  const render = () => {
    const shown = tasks.filter((task) => !type.value || task.type === type.value);
    show(slot, shown.length ? h('div.table-wrap', h('table#tasks',
      h('thead', h('tr', ['Type', 'Database or job', 'Status', 'Progress', 'Started', 'Updated'].map((text) => h('th', { scope: 'col', text })))),
      h('tbody', shown.map(row)))) : h('p.muted#no-tasks', { text: 'Nothing running.' }));
  };
  type.addEventListener('change', render);
  const refresh = async () => {
    try {
      tasks = await get('/_active_tasks');
      updated.textContent = `as of ${new Date().toLocaleTimeString()}`;
      render();
    } catch (error) { show(slot, errorBox(error)); }
  };
  await refresh();
  const timer = setInterval(refresh, every);
  return () => clearInterval(timer);
}

function row(task) {
  let progress = '';
  if (typeof task.progress === 'number') {
    progress = h('span', h('progress', { max: 100, value: task.progress, 'aria-label': `Progress of ${task.type}` }), ` ${task.progress}%`);
  } else if (task.total_changes) {
    progress = h('span', h('progress', { max: task.total_changes, value: task.changes_done || 0, 'aria-label': `Progress of ${task.type}` }),
      ` ${task.changes_done || 0} / ${task.total_changes}`);
  } else if (task.type === 'replication') {
    progress = `${task.docs_written ?? 0} written, ${task.changes_pending ?? 0} pending`;
  }
  const time = (seconds) => (seconds ? new Date(seconds * 1000).toLocaleTimeString() : '');
  const subject = task.type === 'replication'
    ? `${task.doc_id ? `_replicator/${task.doc_id}` : task.replication_id} (${task.source} → ${task.target})`
    : [task.database, task.design_document].filter(Boolean).join(' ');
  return h('tr', { dataset: { type: task.type } },
    h('td', { text: task.type }),
    h('td', h('code', { text: subject })),
    h('td', { text: task.status || (task.phase ? `phase ${task.phase}` : '') }),
    h('td', progress),
    h('td', { text: time(task.started_on) }),
    h('td', { text: time(task.updated_on) }));
}
