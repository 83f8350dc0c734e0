// A view's runner: every query option CouchDB's `_view` takes, results by pages, and the
// request shown as a client would send it.
import { get, post, enc, query } from './api.js';
import { h, show, field, report, checkbox, pager, link } from './ui.js';
import { preview } from './documents.js';

/** Text fields whose value is JSON: [option, label, placeholder]. */
const jsonOptions = [
  ['key', 'Key (JSON)', '"a" or [2024, 1]'],
  ['keys', 'Keys (JSON array)', '["a", "b"]'],
  ['startkey', 'Start key (JSON)', '"a"'],
  ['endkey', 'End key (JSON)', '"b\\ufff0"'],
];
const flags = [
  ['descending', 'Descending', false],
  ['inclusive_end', 'Inclusive end', true],
  ['include_docs', 'Include documents', false],
  ['conflicts', 'Conflicts (with documents)', false],
  ['update_seq', 'Update seq', false],
  ['stable', 'Stable', false],
];

export async function viewScreen(main, [db, ddoc, view]) {
  const [info, design] = await Promise.all([get(`/${enc(db)}`), get(`/${enc(db)}/_design/${enc(ddoc)}`)]);
  const definition = design.views?.[view];
  const hasReduce = !!definition?.reduce;
  const partitioned = !!info.props?.partitioned && design.options?.partitioned !== false;
  const inputs = {};
  const jsonFields = jsonOptions.map(([option, label, placeholder]) => {
    const input = h('input', { type: 'text', id: `view-${option}`, autocomplete: 'off', spellcheck: 'false', placeholder });
    input.addEventListener('input', () => validate(option));
    inputs[option] = input;
    return field(label, input);
  });
  const docidFields = ['startkey_docid', 'endkey_docid'].map((option) => {
    inputs[option] = h('input', { type: 'text', id: `view-${option}`, autocomplete: 'off', spellcheck: 'false', placeholder: 'a document ID' });
    return field(option, inputs[option]);
  });
  const checks = Object.fromEntries(flags.map(([option, label, initial]) => [option, checkbox(label, { id: `view-${option}`, checked: initial })]));
  const reduce = checkbox('Reduce', { id: 'view-reduce', checked: hasReduce, disabled: !hasReduce });
  const group = checkbox('Group', { id: 'view-group', checked: hasReduce, disabled: !hasReduce });
  const groupLevel = h('input#view-group_level', { type: 'number', min: 0, step: 1, placeholder: 'exact keys', disabled: !hasReduce });
  const update = h('select#view-update', {}, ['true', 'false', 'lazy'].map((value) => h('option', { value, text: value })));
  const size = h('select#view-limit', {}, [10, 20, 50, 100, 500].map((n) => h('option', { value: n, text: n, selected: n === 20 })));
  const partition = h('input#view-partition', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'required', required: partitioned });
  const errors = h('div#view-option-errors', { 'aria-live': 'polite' });
  const slot = h('div');
  const results = h('div#view-results');
  const url = h('code#view-url');
  const form = h('form#view-query', { 'aria-label': `Query ${ddoc}/${view}` },
    partitioned ? h('div.row', field('Partition', partition)) : null,
    h('div.row', jsonFields), h('div.row', docidFields),
    h('div.row', reduce.element, group.element, field('Group level', groupLevel), field('Update the index', update), field('Per page', size)),
    h('div.row', flags.map(([option]) => checks[option].element)),
    errors,
    h('div.row', h('button.primary', { type: 'submit', text: 'Run' }), h('span.muted', url)));
  const syncGrouping = () => {
    group.input.disabled = groupLevel.disabled = !reduce.input.checked;
    checks.include_docs.input.disabled = reduce.input.checked;
  };
  reduce.input.addEventListener('change', syncGrouping);
  syncGrouping();

  show(main,
    h('div.crumbs', h('a', { href: '#/', text: 'Databases' }), ' / ', h('a', { href: link('db', db), text: db }), ' / ',
      h('a', { href: link('db', db, 'design', ddoc), text: `_design/${ddoc}` }), ' /'),
    h('h1', { text: `View ${view}` }),
    definition ? h('details.panel', h('summary', { text: hasReduce ? `Map and reduce (${typeof definition.reduce === 'string' && definition.reduce.startsWith('_') ? definition.reduce : 'a function'})` : 'Map function' }),
      h('pre.mono', { text: definition.map }), hasReduce && !definition.reduce.startsWith('_') ? h('pre.mono', { text: definition.reduce }) : null,
      h('a', { href: link('db', db, 'design', ddoc), text: 'Edit in the design document' })) : h('p.error', { text: `_design/${ddoc} has no view ${view}` }),
    h('div.panel', form), slot, results);

  function validate(option) {
    const input = inputs[option];
    let problem = null;
    if (input.value.trim()) {
      try {
        const value = JSON.parse(input.value);
        if (option === 'keys' && !Array.isArray(value)) problem = 'keys must be a JSON array';
      } catch (error) { problem = `${option} is not JSON (strings need double quotes): ${error.message}`; }
    }
    input.setAttribute('aria-invalid', problem ? 'true' : 'false');
    input.dataset.problem = problem || '';
    const all = jsonOptions.map(([name]) => inputs[name].dataset.problem).filter(Boolean);
    show(errors, all.map((text) => h('p.error', { text })));
    return problem;
  }

  let skip = 0;
  function params() {
    const limit = Number(size.value);
    const result = { limit, skip };
    for (const [option] of jsonOptions) if (inputs[option].value.trim()) result[option] = inputs[option].value.trim();
    for (const option of ['startkey_docid', 'endkey_docid']) if (inputs[option].value) result[option] = inputs[option].value;
    for (const [option, , initial] of flags) {
      const input = checks[option].input;
      if (!input.disabled && input.checked !== initial) result[option] = String(input.checked);
    }
    if (hasReduce) {
      result.reduce = String(reduce.input.checked);
      if (reduce.input.checked && groupLevel.value !== '') result.group_level = groupLevel.value;
      else if (reduce.input.checked && group.input.checked) result.group = 'true';
    }
    if (update.value !== 'true') result.update = update.value;
    return result;
  }

  let latest = 0;
  async function run() {
    const mine = ++latest;
    if (jsonOptions.some(([option]) => validate(option))) return;
    const parameters = params();
    const base = partitioned && partition.value.trim() ? `/${enc(db)}/_partition/${enc(partition.value.trim())}` : `/${enc(db)}`;
    const path = `${base}/_design/${enc(ddoc)}/_view/${enc(view)}`;
    url.textContent = parameters.keys ? `POST ${path}${query({ ...parameters, keys: undefined })} {"keys": ${parameters.keys}}` : `GET ${path}${query(parameters)}`;
    report(slot, null);
    let answer;
    // Many keys make a long address: they go in a POST body, as CouchDB takes them.
    const { keys, ...rest } = parameters;
    try { answer = keys ? await post(path, { keys: JSON.parse(keys) }, rest) : await get(path, parameters); } catch (error) {
      if (mine === latest) { report(slot, error); show(results); }
      return;
    }
    if (mine !== latest) return;
    const withDocs = answer.rows.some((row) => row.doc !== undefined);
    const summary = [answer.total_rows !== undefined ? `${answer.total_rows} rows in the index` : 'reduced',
      answer.offset !== undefined ? `offset ${answer.offset}` : null,
      answer.update_seq !== undefined ? `update seq ${String(answer.update_seq).split('-')[0]}` : null].filter(Boolean).join(', ');
    show(results, h('p.muted#view-summary', { text: summary }),
      h('div.table-wrap', h('table#view-rows', h('thead', h('tr', h('th', { scope: 'col', text: 'Key' }), h('th', { scope: 'col', text: 'Value' }),
        h('th', { scope: 'col', text: 'Document ID' }), withDocs ? h('th.hide-narrow', { scope: 'col', text: 'Document' }) : null)),
      h('tbody', answer.rows.map((row) => h('tr', { dataset: { key: JSON.stringify(row.key) } },
        h('td', h('code', { text: JSON.stringify(row.key) })), h('td', h('code', { text: JSON.stringify(row.value) })),
        h('td', row.id !== undefined ? h('a', { href: link('db', db, 'doc', row.id), text: row.id }) : ''),
        withDocs ? h('td.hide-narrow', h('code', { text: row.doc ? preview(row.doc) : 'null' })) : null))))),
      pager({ skip, size: parameters.limit, shown: answer.rows.length, label: 'View pages', onPage: (next) => { skip = next; run(); } }),
      answer.rows.length ? null : h('p.muted', { text: 'No rows.' }));
  }
  form.addEventListener('submit', (event) => { event.preventDefault(); skip = 0; run(); });
  if (!partitioned) run();
}
