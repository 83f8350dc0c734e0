// Mango: the database's indexes (`_index`: list, create from fields, delete) and a query
// editor whose `_find` results are shown beside its `_explain` (which index answers, and how).
import { get, post, del, enc } from './api.js';
import { h, show, field, report, notify, splitList, confirmDialog, checkbox, errorBox } from './ui.js';
import { codeEditor, checkJSON } from './editor.js';
import { documentTable, partitionField } from './documents.js';

export async function mangoView(container, db, info) {
  const partitioned = !!info.props?.partitioned;
  const indexesSlot = h('div');
  const indexErrors = h('div');
  const fields = h('input#index-fields', { type: 'text', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'type, created_at:desc' });
  const indexName = h('input#index-name', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'generated when empty' });
  const indexDdoc = h('input#index-ddoc', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'generated when empty' });
  const indexPartitioned = checkbox('Partitioned index', { id: 'index-partitioned', checked: partitioned });
  const partialFilter = codeEditor({ id: 'index-partial-filter', label: 'Partial filter selector (JSON, optional)', rows: 3,
    check: (text) => (text.trim() ? checkObject(text) : null) });
  const indexForm = h('form#index-form', { 'aria-label': 'Create a Mango index' },
    h('div.row', field('Fields (comma-separated; field:desc for descending)', fields), field('Index name', indexName), field('Design document', indexDdoc),
      partitioned ? indexPartitioned.element : null),
    h('details', h('summary', { text: 'Partial index' }), partialFilter.element),
    h('div.row', h('button.primary', { type: 'submit', text: 'Create index' })), indexErrors);

  indexForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const index = { fields: splitList(fields.value).map((entry) => {
      const [name, direction] = entry.split(':');
      return direction ? { [name.trim()]: direction.trim().toLowerCase() } : name;
    }) };
    if (partialFilter.value.trim()) {
      const problem = partialFilter.check();
      if (problem) { report(indexErrors, new Error(`Partial filter selector: ${problem.message}`)); return; }
      index.partial_filter_selector = JSON.parse(partialFilter.value);
    }
    const body = { index, type: 'json', name: indexName.value.trim() || undefined, ddoc: indexDdoc.value.trim() || undefined };
    if (partitioned) body.partitioned = indexPartitioned.input.checked;
    try {
      const answer = await post(`/${enc(db)}/_index`, body);
      report(indexErrors, null);
      notify(`Index ${answer.name} ${answer.result === 'exists' ? 'exists already' : 'created'} in ${answer.id}`);
      fields.value = '';
      indexName.value = '';
      await loadIndexes();
    } catch (error) { report(indexErrors, error); }
  });

  async function loadIndexes() {
    let answer;
    try { answer = await get(`/${enc(db)}/_index`); } catch (error) { report(indexesSlot, error); return; }
    const rows = answer.indexes.map((index) => {
      const name = `${index.ddoc ? index.ddoc.replace(/^_design\//, '') : ''}/${index.name}`;
      const remove = index.type === 'special' ? '' : h('button', { type: 'button', text: 'Delete', 'aria-label': `Delete index ${index.name}`,
        on: { click: async () => {
          if (!await confirmDialog({ title: `Delete the index ${index.name}?`, message: `Queries it answered scan more documents, or fail if they sort on its fields. Its design document ${index.ddoc} loses it.`, confirmLabel: 'Delete the index' })) return;
          try {
            await del(`/${enc(db)}/_index/${enc(index.ddoc.replace(/^_design\//, ''))}/${enc(index.type)}/${enc(index.name)}`);
            notify(`Index ${index.name} deleted`);
            await loadIndexes();
          } catch (error) { report(indexErrors, error); }
        } } });
      return h('tr', { dataset: { index: index.name } },
        h('th', { scope: 'row' }, h('code', { text: index.name })),
        h('td', h('code', { text: index.ddoc || '' })),
        h('td', { text: index.type }),
        h('td', h('code', { text: (index.def?.fields || []).map((f) => { const [k, v] = Object.entries(f)[0]; return v === 'asc' ? k : `${k}:${v}`; }).join(', ') })),
        h('td.hide-narrow', { text: index.partitioned === undefined ? '' : String(index.partitioned) }),
        h('td', remove));
    });
    show(indexesSlot, h('div.table-wrap', h('table#indexes', h('thead', h('tr', ['Name', 'Design document', 'Type', 'Fields', 'Partitioned', 'Actions']
      .map((text, i) => h(i === 4 ? 'th.hide-narrow' : 'th', { scope: 'col', text })))), h('tbody', rows))),
    h('p.muted', { text: `${answer.total_rows} indexes` }));
  }

  // The query: results on one side, the plan on the other.
  const queryEditor = codeEditor({ id: 'mango-query', label: 'Query (the body of POST /_find)', rows: 8,
    value: '{\n  "selector": {},\n  "limit": 25\n}', check: checkObject });
  const partition = partitioned ? partitionField('mango-partition') : null;
  const querySlot = h('div#mango-errors');
  const results = h('div#mango-results');
  const plan = h('div#mango-explain');
  const queryForm = h('form#mango-form', { 'aria-label': 'Run a Mango query' }, queryEditor.element,
    h('div.row', partition ? partition.element : null, h('button.primary', { type: 'submit', text: 'Run query' }),
      h('button#mango-explain-only', { type: 'button', text: 'Explain only' })), querySlot);
  let bookmarks = [];

  async function run({ explainOnly = false, bookmark } = {}) {
    report(querySlot, null);
    const problem = queryEditor.check();
    if (problem) { report(querySlot, new Error(`The query is not a JSON object: ${problem.message}`)); return; }
    let body = JSON.parse(queryEditor.value);
    if (!('selector' in body)) body = { selector: body };
    const base = partition ? partition.prefix(db) : `/${enc(db)}`;
    const [found, explained] = await Promise.all([
      explainOnly ? null : post(`${base}/_find`, { ...body, execution_stats: true, bookmark }).catch((error) => error),
      post(`${base}/_explain`, body).catch((error) => error)]);
    if (explained instanceof Error) show(plan, h('h3', { text: 'Explain' }), errorBox(explained));
    else show(plan, explainPanel(explained));
    if (explainOnly) return;
    if (found instanceof Error) { report(querySlot, found); show(results); return; }
    const rows = found.docs.map((doc) => ({ id: doc._id, rev: doc._rev, doc }));
    const stats = found.execution_stats;
    const previous = h('button', { type: 'button', text: 'Previous', disabled: bookmarks.length === 0,
      on: { click: () => { bookmarks.pop(); run({ bookmark: bookmarks[bookmarks.length - 1] }); } } });
    const next = h('button', { type: 'button', text: 'Next', disabled: !found.bookmark || found.docs.length < (body.limit ?? 25),
      on: { click: () => { bookmarks.push(found.bookmark); run({ bookmark: found.bookmark }); } } });
    show(results, h('h3', { text: `Results: ${found.docs.length}` }),
      found.warning ? h('p.warning', { role: 'note', text: `The server warns: ${found.warning}` }) : null,
      stats ? h('p.muted#mango-stats', { text: `${stats.total_docs_examined} documents examined, ${stats.results_returned} returned, ${Math.round(stats.execution_time_ms * 10) / 10} ms` }) : null,
      documentTable(db, rows, 'find'), h('nav.pager', { 'aria-label': 'Result pages' }, previous, next));
  }
  queryForm.addEventListener('submit', (event) => { event.preventDefault(); bookmarks = []; run(); });
  queryForm.querySelector('#mango-explain-only').addEventListener('click', () => run({ explainOnly: true }));

  show(container,
    h('h2', { text: 'Indexes' }), h('div.panel', indexForm), indexesSlot,
    h('h2', { text: 'Query' }), h('div.panel', queryForm),
    h('div.grid2.mango-output', results, h('aside.panel', { 'aria-label': 'Query plan' }, plan)));
  show(plan, h('p.muted', { text: 'Run or explain a query to see which index answers it.' }));
  await loadIndexes();
}

/** A JSON object's first error, or null. */
function checkObject(text) {
  const error = checkJSON(text);
  if (error) return error;
  const value = JSON.parse(text);
  return value && typeof value === 'object' && !Array.isArray(value) ? null : { message: 'A JSON object is needed', line: 0, ch: 0 };
}

/** `_explain`'s answer: the index chosen, its fields, and the range read. */
function explainPanel(plan) {
  const index = plan.index || {};
  const fields = (index.def?.fields || []).map((f) => Object.keys(f)[0]).join(', ');
  return h('div', h('h3', { text: 'Explain' }),
    h('dl.explain',
      h('dt', { text: 'Index' }), h('dd#explain-index', { dataset: { name: index.name || '', type: index.type || '' } },
        h('code', { text: index.type === 'special' ? 'all documents (_all_docs): no index matches' : `${index.ddoc}/${index.name}` })),
      h('dt', { text: 'Type' }), h('dd', { text: index.type || '' }),
      fields ? [h('dt', { text: 'Fields' }), h('dd', h('code', { text: fields }))] : null,
      plan.mrargs ? [h('dt', { text: 'Range read' }), h('dd', h('code', { text: `${JSON.stringify(plan.mrargs.start_key)} … ${JSON.stringify(plan.mrargs.end_key)}` }))] : null,
      h('dt', { text: 'Limit / skip' }), h('dd', { text: `${plan.limit} / ${plan.skip}` })),
    h('details', h('summary', { text: 'The whole answer' }), h('pre.mono', { text: JSON.stringify(plan, null, 2) })));
}
