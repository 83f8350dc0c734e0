// One database: its documents (`_all_docs` by key range, or a Mango selector through
// `_find`), its live changes and its `_security`.
import { get, post, put, enc } from './api.js';
import { h, show, field, report, notify, seqNumber, pager, link, splitList, checkbox, formatBytes } from './ui.js';
import { changesView } from './changes.js';

const tabs = [['', 'Documents'], ['changes', 'Live changes'], ['security', 'Security']];

export async function databaseScreen(main, [db, tab]) {
  const info = await get(`/${enc(db)}`);
  const body = h('div');
  show(main,
    h('div.crumbs', h('a', { href: '#/', text: 'Databases' }), ' / '),
    h('h1', { text: db }),
    h('p.muted', { text: `${info.doc_count} documents, ${info.doc_del_count} deleted, ${formatBytes(info.sizes?.file)}, update seq ${seqNumber(info.update_seq)}` }),
    h('nav.tabs', { 'aria-label': 'Database views' }, tabs.map(([path, label]) =>
      h('a', { href: path ? link('db', db, path) : link('db', db), text: label, 'aria-current': (tab || '') === path ? 'page' : null }))),
    body);
  if (tab === 'changes') return changesView(body, db);
  if (tab === 'security') return securityView(body, db);
  return documentsView(body, db);
}

function documentsView(container, db) {
  let skip = 0;
  let mode = 'all';
  const size = h('select', {}, [10, 20, 50, 100].map((n) => h('option', { value: n, text: n, selected: n === 20 })));
  const startkey = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'first ID' });
  const endkey = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'last ID' });
  const descending = checkbox('Descending');
  const selector = h('textarea', { rows: 3, spellcheck: 'false', value: '{\n  "selector": {}\n}' });
  const slot = h('div');
  const list = h('div');
  const rangeForm = h('form.row', { id: 'range-form', 'aria-label': 'List by key range' },
    field('Start key', startkey), field('End key', endkey), field('Per page', size), descending.element,
    h('button.primary', { type: 'submit', text: 'List' }),
    h('a', { href: link('db', db, 'new'), id: 'new-doc', text: 'New document' }));
  const findForm = h('form', { id: 'find-form', 'aria-label': 'Find with a Mango query' },
    field('Mango query (POST /_find)', selector), h('div.row', h('button', { type: 'submit', text: 'Run query' })));
  const viewSelect = h('select', {}, h('option', { value: '', text: '(no views yet)' }));
  const viewStart = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'JSON, e.g. "a" or [1]' });
  const viewEnd = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'JSON' });
  const reduce = checkbox('Reduce', { id: 'view-reduce' });
  const viewForm = h('form.row', { id: 'view-form', 'aria-label': 'Query a view' },
    field('View (design document / name)', viewSelect), field('Start key (JSON)', viewStart), field('End key (JSON)', viewEnd),
    reduce.element, h('button', { type: 'submit', text: 'Query view' }));
  const viewsPanel = h('details.panel#views-panel', h('summary', { text: 'Views' }), viewForm);
  show(container, h('div.panel', rangeForm), h('details.panel#find-panel', h('summary', { text: 'Mango query' }), findForm), viewsPanel, slot, list);
  viewsPanel.addEventListener('toggle', async () => {
    if (!viewsPanel.open || viewSelect.dataset.loaded) return;
    try {
      const answer = await get(`/${enc(db)}/_design_docs`, { include_docs: true });
      const options = [];
      for (const row of answer.rows) {
        for (const [name, view] of Object.entries((row.doc && row.doc.views) || {})) {
          const ddoc = row.id.slice('_design/'.length);
          options.push(h('option', { value: `${ddoc}/${name}`, text: `${ddoc} / ${name}`, dataset: { reduce: view.reduce ? 'yes' : '' } }));
        }
      }
      if (options.length) show(viewSelect, options);
      viewSelect.dataset.loaded = 'yes';
      reduce.input.checked = !!viewSelect.selectedOptions[0]?.dataset.reduce;
    } catch (error) { report(slot, error); }
  });
  viewSelect.addEventListener('change', () => { reduce.input.checked = !!viewSelect.selectedOptions[0]?.dataset.reduce; });
  viewForm.addEventListener('submit', (event) => { event.preventDefault(); mode = 'view'; skip = 0; load(); });

  rangeForm.addEventListener('submit', (event) => { event.preventDefault(); mode = 'all'; skip = 0; load(); });
  findForm.addEventListener('submit', (event) => { event.preventDefault(); mode = 'find'; skip = 0; load(); });
  size.addEventListener('change', () => { skip = 0; load(); });

  let latest = 0;
  async function load() {
    const mine = ++latest;
    const limit = Number(size.value);
    report(slot, null);
    let rows;
    try {
      if (mode === 'view') {
        if (!viewSelect.value) throw new Error('This database has no view: define one in a design document’s "views".');
        const [ddoc, ...name] = viewSelect.value.split('/');
        for (const [label, input] of [['Start key', viewStart], ['End key', viewEnd]]) {
          if (input.value) try { JSON.parse(input.value); } catch { throw new Error(`${label} is not JSON (strings need quotes)`); }
        }
        const answer = await get(`/${enc(db)}/_design/${enc(ddoc)}/_view/${enc(name.join('/'))}`, {
          limit, skip, reduce: String(reduce.input.checked), group: reduce.input.checked ? 'true' : undefined,
          startkey: viewStart.value || undefined, endkey: viewEnd.value || undefined,
        });
        rows = answer.rows.map((row) => ({ id: row.id, key: row.key, value: row.value }));
      } else if (mode === 'find') {
        let body;
        try { body = JSON.parse(selector.value); } catch (error) { throw new Error(`The query is not JSON: ${error.message}`); }
        if (!body || typeof body !== 'object' || Array.isArray(body)) throw new Error('The query must be a JSON object');
        if (!('selector' in body)) body = { selector: body };
        const answer = await post(`/${enc(db)}/_find`, { ...body, limit, skip });
        rows = answer.docs.map((doc) => ({ id: doc._id, rev: doc._rev, doc }));
        if (answer.warning) show(slot, h('p.muted', { role: 'note', text: `The server warns: ${answer.warning}` }));
      } else {
        const answer = await get(`/${enc(db)}/_all_docs`, {
          limit, skip, conflicts: true, include_docs: true,
          descending: descending.input.checked || undefined,
          startkey: startkey.value ? JSON.stringify(startkey.value) : undefined,
          endkey: endkey.value ? JSON.stringify(endkey.value) : undefined,
        });
        rows = answer.rows.map((row) => ({ id: row.id, rev: row.value.rev, doc: row.doc, total: answer.total_rows }));
      }
    } catch (error) {
      if (mine !== latest) return;
      report(slot, error);
      show(list);
      return;
    }
    // A later listing started meanwhile: it draws, not this one.
    if (mine !== latest) return;
    if (mode === 'view') {
      show(list, h('div.table-wrap', h('table', { id: 'documents', dataset: { mode } },
        h('thead', h('tr', h('th', { scope: 'col', text: 'Key' }), h('th', { scope: 'col', text: 'Value' }), h('th', { scope: 'col', text: 'Document' }))),
        h('tbody', rows.map((row) => h('tr', { dataset: { key: JSON.stringify(row.key) } },
          h('td', h('code', { text: JSON.stringify(row.key) })), h('td', h('code', { text: JSON.stringify(row.value) })),
          h('td', row.id !== undefined ? h('a', { href: link('db', db, 'doc', row.id), text: row.id }) : '')))))),
      pager({ skip, size: limit, shown: rows.length, label: 'View pages', onPage: (next) => { skip = next; load(); } }));
      return;
    }
    const table = h('table', { id: 'documents', dataset: { mode } },
      h('thead', h('tr', h('th', { scope: 'col', text: 'ID' }), h('th', { scope: 'col', text: 'Revision' }),
        h('th.hide-narrow', { scope: 'col', text: 'Content' }))),
      h('tbody', rows.map((row) => h('tr', { dataset: { id: row.id } },
        h('th', { scope: 'row' }, h('a', { href: link('db', db, 'doc', row.id), text: row.id }),
          row.doc && row.doc._conflicts ? [' ', h('span.badge.bad', { text: `${row.doc._conflicts.length} conflict${row.doc._conflicts.length > 1 ? 's' : ''}` })] : null),
        h('td', h('code', { text: row.rev })),
        h('td.hide-narrow', h('code', { text: preview(row.doc) }))))));
    show(list, h('div.table-wrap', table),
      pager({ skip, size: limit, shown: rows.length, label: 'Document pages', onPage: (next) => { skip = next; load(); } }),
      rows.length ? null : h('p.muted', { text: 'No documents here.' }));
  }

  load();
}

function preview(doc) {
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
