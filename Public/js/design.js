// Design documents: the list of a database's, and an editor for one: views (map, and a reduce
// among CouchDB's built-in ones or a function), validate_doc_update, filters, shows, lists,
// updates and transforms, each in a JavaScript editor. Saving answers CouchDB's
// `compilation_error`, shown on the function it names.
import { get, put, docPath, enc, CouchError } from './api.js';
import { h, show, field, report, notify, link, checkbox } from './ui.js';
import { codeEditor, checkFunction } from './editor.js';

const builtInReduces = ['_count', '_sum', '_stats', '_approx_count_distinct'];
/** Members holding functions by name: [member, singular label, a starting function]. */
const kinds = [
  ['filters', 'Filter', 'function (doc, req) {\n  return true;\n}'],
  ['shows', 'Show', 'function (doc, req) {\n  return { json: doc };\n}'],
  ['lists', 'List', 'function (head, req) {\n  var row;\n  start({ headers: { "Content-Type": "text/plain" } });\n  while ((row = getRow())) send(row.key + "\\n");\n}'],
  ['updates', 'Update', 'function (doc, req) {\n  return [doc, "ok"];\n}'],
  ['transforms', 'Transform', 'function (doc, direction) {\n  return doc;\n}'],
];
const newMap = 'function (doc) {\n  emit(doc._id, 1);\n}';

/** The database's design documents, Mango's set apart (they are managed in the Mango tab). */
export async function designList(container, db) {
  const answer = await get(`/${enc(db)}/_design_docs`, { include_docs: true });
  const rows = answer.rows.map((row) => {
    const doc = row.doc || {};
    const name = row.id.slice('_design/'.length);
    const mango = doc.language === 'query';
    const counts = [['views', 'view']].concat(kinds.map(([member, label]) => [member, label.toLowerCase()]))
      .map(([member, label]) => [Object.keys(doc[member] || {}).length, label])
      .filter(([n]) => n).map(([n, label]) => `${n} ${label}${n > 1 ? 's' : ''}`);
    if (doc.validate_doc_update) counts.push('validation');
    return h('tr', { dataset: { ddoc: name } },
      h('th', { scope: 'row' }, mango ? h('a', { href: link('db', db, 'mango'), text: name })
        : h('a', { href: link('db', db, 'design', name), text: name })),
      h('td', { text: mango ? 'Mango index (see the Mango tab)' : counts.join(', ') || 'nothing yet' }),
      h('td', Object.keys(doc.views || {}).filter(() => !mango).map((view) =>
        h('a.chip', { href: link('db', db, 'view', name, view), text: view, 'aria-label': `Run view ${name}/${view}` }))),
      h('td', h('a', { href: link('db', db, 'doc', row.id), text: 'JSON', 'aria-label': `${name} as JSON` })));
  });
  show(container, h('div.row', h('a.button.primary#new-design', { href: link('db', db, 'new-design'), text: 'New design document' })),
    rows.length ? h('div.table-wrap', h('table#design-docs', h('thead', h('tr', ['Design document', 'Functions', 'Run a view', 'Raw']
      .map((text) => h('th', { scope: 'col', text })))), h('tbody', rows))) : h('p.muted', { text: 'No design documents.' }));
}

export async function designScreen(main, [db, name], context) {
  const isNew = context.isNew;
  const info = await get(`/${enc(db)}`);
  let doc = { _id: '_design/', language: 'javascript', views: {} };
  if (!isNew) doc = await get(docPath(db, `_design/${name}`));
  const crumbs = h('div.crumbs', h('a', { href: '#/', text: 'Databases' }), ' / ', h('a', { href: link('db', db), text: db }), ' / ',
    h('a', { href: link('db', db, 'design'), text: 'design documents' }), ' /');
  if (doc.language && doc.language !== 'javascript') {
    show(main, crumbs, h('h1', { text: `_design/${name}` }),
      h('p', { text: `Its language is "${doc.language}" (a Mango index's design document is managed in the Mango tab); ` },
        h('a', { href: link('db', db, 'doc', doc._id), text: 'edit it as JSON' })));
    return;
  }

  const slot = h('div#design-errors');
  const editors = [];
  const nameInput = h('input#design-name', { type: 'text', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'app' });
  const viewsList = h('div#design-views');

  function viewBlock(viewName, view) {
    const nameField = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', value: viewName, required: true, 'aria-label': 'View name' });
    const map = codeEditor({ label: 'Map function', mode: 'javascript', value: view.map || newMap, rows: 6 });
    const custom = typeof view.reduce === 'string' && !builtInReduces.includes(view.reduce);
    const reduceSelect = h('select', { 'aria-label': 'Reduce' },
      h('option', { value: '', text: 'None' }),
      builtInReduces.map((r) => h('option', { value: r, text: r, selected: view.reduce === r })),
      h('option', { value: 'custom', text: 'A function (custom)', selected: custom }));
    const reduce = codeEditor({ label: 'Reduce function', mode: 'javascript', value: custom ? view.reduce : 'function (keys, values, rereduce) {\n  return sum(values);\n}', rows: 5 });
    reduce.element.hidden = !custom;
    reduceSelect.addEventListener('change', () => { reduce.element.hidden = reduceSelect.value !== 'custom'; });
    const run = h('button', { type: 'button', text: 'Save and run', 'aria-label': `Save and run view ${viewName || 'new'}` });
    const remove = h('button', { type: 'button', text: 'Remove view', 'aria-label': `Remove view ${viewName || 'new'}` });
    const block = h('fieldset.panel.view-block', { dataset: { view: viewName } },
      h('legend', { text: viewName ? `View ${viewName}` : 'New view' }),
      h('div.row', field('Name', nameField), field('Reduce', reduceSelect), run, remove), map.element, reduce.element);
    const entry = {
      kind: 'view',
      get name() { return nameField.value.trim(); },
      value() {
        const result = { ...view, map: map.value };
        delete result.reduce;
        if (reduceSelect.value === 'custom') result.reduce = reduce.value;
        else if (reduceSelect.value) result.reduce = reduceSelect.value;
        return result;
      },
      editorFor(part) { return part === 'reduce' ? reduce : map; },
      all: [map, reduce],
    };
    remove.addEventListener('click', () => { editors.splice(editors.indexOf(entry), 1); block.remove(); });
    run.addEventListener('click', async () => {
      if (await save()) location.hash = link('db', db, 'view', currentName(), entry.name);
    });
    editors.push(entry);
    return block;
  }

  function functionBlock(member, label, fnName, source) {
    const nameField = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', value: fnName, required: true, 'aria-label': `${label} name` });
    const editor = codeEditor({ label: `${label} function`, mode: 'javascript', value: source, rows: 5 });
    const remove = h('button', { type: 'button', text: `Remove ${label.toLowerCase()}`, 'aria-label': `Remove ${label.toLowerCase()} ${fnName || 'new'}` });
    const block = h('div.function-block', { dataset: { name: fnName } }, h('div.row', field('Name', nameField), remove), editor.element);
    const entry = { kind: member, get name() { return nameField.value.trim(); }, value: () => editor.value, editorFor: () => editor, all: [editor] };
    remove.addEventListener('click', () => { editors.splice(editors.indexOf(entry), 1); block.remove(); });
    editors.push(entry);
    return block;
  }

  for (const [viewName, view] of Object.entries(doc.views || {})) viewsList.append(viewBlock(viewName, view));
  const addView = h('button#add-view', { type: 'button', text: 'Add a view', on: { click: () => {
    const block = viewBlock('', {});
    viewsList.append(block);
    block.querySelector('input').focus();
  } } });

  const validation = codeEditor({ id: 'validate-doc-update', label: 'validate_doc_update (empty: none)', mode: 'javascript',
    // None is allowed: only a written one is checked.
    value: doc.validate_doc_update || '', rows: 6, check: (text) => (text.trim() ? checkFunction(text) : null) });
  const validationEntry = { kind: 'validate_doc_update', all: [validation] };
  const kindSections = kinds.map(([member, label, starter]) => {
    const list = h('div', { id: `design-${member}` });
    for (const [fnName, source] of Object.entries(doc[member] || {})) list.append(functionBlock(member, label, fnName, source));
    const add = h('button', { type: 'button', text: `Add a ${label.toLowerCase()}`, id: `add-${member}`, on: { click: () => {
      const block = functionBlock(member, label, '', starter);
      list.append(block);
      block.querySelector('input').focus();
    } } });
    const count = Object.keys(doc[member] || {}).length;
    return h('details.panel', { open: count > 0, id: `section-${member}` }, h('summary', { text: `${label}s (${member})${count ? `: ${count}` : ''}` }), list, add);
  });

  const partitionedChoice = checkbox('Partitioned views (options.partitioned)', { id: 'design-partitioned',
    checked: doc.options?.partitioned ?? !!info.props?.partitioned });
  const saveButton = h('button.primary#save-design', { type: 'button', text: isNew ? 'Create design document' : 'Save' });
  saveButton.addEventListener('click', async () => { if (await save() && isNew) location.hash = link('db', db, 'design', currentName()); });

  const currentName = () => (isNew ? nameInput.value.trim() : name);

  function build() {
    const result = { ...doc, _id: `_design/${currentName()}` };
    if (!result._rev) delete result._rev;
    result.views = {};
    for (const entry of editors.filter((e) => e.kind === 'view')) {
      if (!entry.name) throw new Error('Every view needs a name');
      result.views[entry.name] = entry.value();
    }
    for (const [member] of kinds) {
      const entries = editors.filter((e) => e.kind === member);
      if (!entries.length) { delete result[member]; continue; }
      result[member] = {};
      for (const entry of entries) {
        if (!entry.name) throw new Error(`Every function of ${member} needs a name`);
        result[member][entry.name] = entry.value();
      }
    }
    if (validation.value.trim()) result.validate_doc_update = validation.value; else delete result.validate_doc_update;
    if (info.props?.partitioned) result.options = { ...(doc.options || {}), partitioned: partitionedChoice.input.checked };
    return result;
  }

  /** Saves; true when the server took it. A compilation error is shown on its function. */
  async function save() {
    report(slot, null);
    for (const entry of [...editors, validationEntry]) for (const editor of entry.all) editor.check();
    if (!currentName()) { report(slot, new Error('Name the design document first')); nameInput.focus(); return false; }
    let body;
    try { body = build(); } catch (error) { report(slot, error); return false; }
    try {
      const answer = await put(docPath(db, body._id), body);
      doc = { ...body, _rev: answer.rev };
      notify(`Saved ${body._id} as ${answer.rev}`);
      return true;
    } catch (error) {
      report(slot, error);
      if (error instanceof CouchError) pointAt(error);
      return false;
    }
  }

  /** CouchDB's reasons name the function: "Compilation of the map function in the 'v' view failed: …". */
  function pointAt(error) {
    const reason = String(error.body?.reason || '');
    let target = null;
    let match = /^Compilation of the (map|reduce) function in the '(.*)' view failed: ([\s\S]*)$/.exec(reason);
    if (match) {
      const entry = editors.find((e) => e.kind === 'view' && e.name === match[2]);
      target = entry && entry.editorFor(match[1]);
    } else if ((match = /^Compilation of the validate_doc_update function failed: ([\s\S]*)$/.exec(reason))) {
      target = validation;
    } else if ((match = /^Compilation of the (\w+) function '(.*)' failed: ([\s\S]*)$/.exec(reason))) {
      const entry = editors.find((e) => e.kind === `${match[1]}s` && e.name === match[2]);
      target = entry && entry.editorFor();
    }
    if (!target) return;
    target.markError(`${error.body.error}: ${reason}`);
    target.element.closest('details')?.setAttribute('open', '');
    target.element.scrollIntoView({ block: 'center' });
    target.focus();
  }

  show(main, crumbs,
    h('h1', { text: isNew ? 'New design document' : `_design/${name}` }),
    isNew ? h('div.row', field('Name (after _design/)', nameInput)) : h('p.muted', {},
      `Revision ${doc._rev}. `, h('a', { href: link('db', db, 'doc', doc._id), text: 'Edit as JSON' }), ' · ',
      h('a', { href: link('db', db, 'maintenance'), text: 'compact its views' })),
    h('div.row.sticky-actions', saveButton, info.props?.partitioned ? partitionedChoice.element : null), slot,
    h('h2', { text: 'Views' }), viewsList, h('div.row', addView),
    h('h2', { text: 'Functions' }),
    h('details.panel#section-validation', { open: !!doc.validate_doc_update }, h('summary', { text: 'Validation (validate_doc_update)' }), validation.element),
    kindSections);
  if (isNew) {
    nameInput.focus();
    if (!editors.length) viewsList.append(viewBlock('all', { map: newMap }));
  }
  return null;
}
