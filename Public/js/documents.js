// One database: its documents (`_all_docs` by key range, of one partition in a partitioned
// database) and the tabs for its design documents, Mango, live changes, maintenance and
// `_security`.
import { get, put, enc } from './api.js';
import { h, show, field, report, notify, seqNumber, pager, link, splitList, checkbox, formatBytes } from './ui.js';
import { changesView } from './changes.js';
import { designList } from './design.js';
import { mangoView } from './mango.js';
import { maintenanceView } from './maintenance.js';

const tabs = [['', 'Documents'], ['design', 'Design documents'], ['mango', 'Mango'], ['changes', 'Live changes'],
  ['maintenance', 'Maintenance'], ['security', 'Security']];

export async function databaseScreen(main, [db, tab]) {
  const info = await get(`/${enc(db)}`);
  const body = h('div');
  const partitioned = !!info.props?.partitioned;
  show(main,
    h('div.crumbs', h('a', { href: '#/', text: 'Databases' }), ' / '),
    h('h1', {}, db, partitioned ? [' ', h('span.badge#partitioned-badge', { text: 'partitioned' })] : null),
    h('p.muted', { text: `${info.doc_count} documents, ${info.doc_del_count} deleted, ${formatBytes(info.sizes?.file)}, update seq ${seqNumber(info.update_seq)}` }),
    h('nav.tabs', { 'aria-label': 'Database views' }, tabs.map(([path, label]) =>
      h('a', { href: path ? link('db', db, path) : link('db', db), text: label, 'aria-current': (tab || '') === path ? 'page' : null }))),
    body);
  if (tab === 'changes') return changesView(body, db);
  if (tab === 'security') return securityView(body, db);
  if (tab === 'design') return designList(body, db);
  if (tab === 'mango') return mangoView(body, db, info);
  if (tab === 'maintenance') return maintenanceView(body, db, info);
  return documentsView(body, db, partitioned);
}

/** A partition's name for a partitioned database's queries: empty means the whole database. */
export function partitionField(id) {
  const input = h('input', { type: 'text', id, autocomplete: 'off', spellcheck: 'false', placeholder: 'all partitions' });
  return { input, element: field('Partition', input), prefix: (db) => (input.value.trim()
    ? `/${enc(db)}/_partition/${enc(input.value.trim())}` : `/${enc(db)}`) };
}

function documentsView(container, db, partitioned) {
  let skip = 0;
  const size = h('select', {}, [10, 20, 50, 100].map((n) => h('option', { value: n, text: n, selected: n === 20 })));
  const startkey = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'first ID' });
  const endkey = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'last ID' });
  const descending = checkbox('Descending');
  const partition = partitioned ? partitionField('documents-partition') : null;
  const slot = h('div');
  const list = h('div');
  const rangeForm = h('form.row', { id: 'range-form', 'aria-label': 'List by key range' },
    partition ? partition.element : null,
    field('Start key', startkey), field('End key', endkey), field('Per page', size), descending.element,
    h('button.primary', { type: 'submit', text: 'List' }),
    h('a', { href: link('db', db, 'new'), id: 'new-doc', text: 'New document' }));
  show(container, h('div.panel', rangeForm), slot, list);
  rangeForm.addEventListener('submit', (event) => { event.preventDefault(); skip = 0; load(); });
  size.addEventListener('change', () => { skip = 0; load(); });

  let latest = 0;
  async function load() {
    const mine = ++latest;
    const limit = Number(size.value);
    report(slot, null);
    let rows;
    try {
      const answer = await get(`${partition ? partition.prefix(db) : `/${enc(db)}`}/_all_docs`, {
        limit, skip, conflicts: true, include_docs: true,
        descending: descending.input.checked || undefined,
        startkey: startkey.value ? JSON.stringify(startkey.value) : undefined,
        endkey: endkey.value ? JSON.stringify(endkey.value) : undefined,
      });
      rows = answer.rows.map((row) => ({ id: row.id, rev: row.value.rev, doc: row.doc }));
    } catch (error) {
      if (mine !== latest) return;
      report(slot, error);
      show(list);
      return;
    }
    // A later listing started meanwhile: it draws, not this one.
    if (mine !== latest) return;
    show(list, documentTable(db, rows, 'all'),
      pager({ skip, size: limit, shown: rows.length, label: 'Document pages', onPage: (next) => { skip = next; load(); } }),
      rows.length ? null : h('p.muted', { text: 'No documents here.' }));
  }

  load();
}

/** Documents as a table: ID (with its conflicts), revision, content. */
export function documentTable(db, rows, mode) {
  return h('div.table-wrap', h('table', { id: 'documents', dataset: { mode } },
    h('thead', h('tr', h('th', { scope: 'col', text: 'ID' }), h('th', { scope: 'col', text: 'Revision' }),
      h('th.hide-narrow', { scope: 'col', text: 'Content' }))),
    h('tbody', rows.map((row) => h('tr', { dataset: { id: row.id } },
      h('th', { scope: 'row' }, h('a', { href: link('db', db, 'doc', row.id), text: row.id }),
        row.doc && row.doc._conflicts ? [' ', h('span.badge.bad', { text: `${row.doc._conflicts.length} conflict${row.doc._conflicts.length > 1 ? 's' : ''}` })] : null),
      h('td', h('code', { text: row.rev })),
      h('td.hide-narrow', h('code', { text: preview(row.doc) })))))));
}

export function preview(doc) {
  if (!doc) return '';
  const shown = {};
  for (const [key, value] of Object.entries(doc)) if (!key.startsWith('_')) shown[key] = value;
  const text = JSON.stringify(shown);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

async function securityView(container, db) {
  const security = await get(`/${enc(db)}/_security`);
  const inputs = {};
  const rows = [];
  for (const group of ['admins', 'members']) {
    for (const kind of ['names', 'roles']) {
      const input = h('input', { type: 'text', id: `security-${group}-${kind}`, autocomplete: 'off', spellcheck: 'false',
        value: ((security[group] || {})[kind] || []).join(', ') });
      inputs[`${group}.${kind}`] = input;
      rows.push(field(`${group === 'admins' ? 'Admins' : 'Members'}: ${kind} (comma-separated)`, input));
    }
  }
  const slot = h('div');
  const form = h('form', { id: 'security-form', 'aria-label': 'Security' },
    h('p.muted', { text: 'Members may read and write documents; admins may also change design documents and this. With no member, the database is open to everyone who can reach it.' }),
    h('div.grid2', rows), h('div.row', h('button.primary', { type: 'submit', text: 'Save security' })), slot);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const updated = { ...security };
    for (const group of ['admins', 'members']) {
      updated[group] = { ...(security[group] || {}), names: splitList(inputs[`${group}.names`].value), roles: splitList(inputs[`${group}.roles`].value) };
    }
    try {
      await put(`/${enc(db)}/_security`, updated);
      report(slot, null);
      notify('Security saved');
    } catch (error) { report(slot, error); }
  });
  show(container, h('div.panel', form));
}
