// One document: a JSON editor (the server's errors shown as returned), delete, revision
// history, conflicts side by side with one action to resolve them, and attachments.
import { get, put, post, del, upload, docPath, enc } from './api.js';
import { h, show, field, report, notify, confirmDialog, formatBytes, link, errorBox } from './ui.js';
import { codeEditor } from './editor.js';

export async function documentScreen(main, [db, id], context) {
  const again = () => documentScreen(main, [db, id], context);
  const crumbs = h('div.crumbs', h('a', { href: '#/', text: 'Databases' }), ' / ', h('a', { href: link('db', db), text: db }), ' /');
  if (context.isNew) return newDocument(main, db, crumbs);

  let doc;
  try {
    doc = await get(docPath(db, id), { revs_info: true, conflicts: true, deleted_conflicts: true });
  } catch (error) {
    show(main, crumbs, h('h1', { text: id }), errorBox(error), h('p', h('a', { href: link('db', db), text: 'Back to the documents' })));
    return;
  }
  const { _revs_info: history = [], _conflicts: conflicts = [], _deleted_conflicts: deletedConflicts = [] } = doc;
  const editable = { ...doc };
  delete editable._revs_info; delete editable._conflicts; delete editable._deleted_conflicts;

  const editor = codeEditor({ id: 'doc-editor', label: `Document JSON (revision ${doc._rev})`, value: JSON.stringify(editable, null, 2), rows: 20 });
  const slot = h('div#doc-errors');
  const save = h('button.primary#save-doc', { type: 'button', text: 'Save' });
  const remove = h('button.danger', { type: 'button', text: 'Delete document' });
  save.addEventListener('click', async () => {
    const problem = editor.check();
    if (problem) { report(slot, new Error(`Not JSON (line ${problem.line + 1}): ${problem.message}`)); return; }
    try {
      const answer = await put(docPath(db, id), JSON.parse(editor.value));
      notify(`Saved ${id} as ${answer.rev}`);
      await again();
    } catch (error) { report(slot, error); }
  });
  remove.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: `Delete ${id}?`, message: `Revision ${doc._rev} of ${id} in ${db} gets a deleted successor.`, confirmLabel: `Delete ${id}` });
    if (!ok) return;
    try {
      await del(docPath(db, id), { rev: doc._rev });
      notify(`Deleted ${id}`);
      location.hash = link('db', db);
    } catch (error) { report(slot, error); }
  });

  const conflictSlot = h('section', { 'aria-labelledby': 'conflicts-title' });
  const attachmentsSlot = h('section', { 'aria-labelledby': 'attachments-title' });
  const historySlot = h('section', { 'aria-labelledby': 'history-title' });
  show(main, crumbs, h('h1', { text: id }),
    conflicts.length ? h('p', h('span.badge.bad', { text: `${conflicts.length} conflicting revision${conflicts.length > 1 ? 's' : ''}` }), ' ', h('a', { href: '#conflicts-title', text: 'see them side by side' })) : null,
    h('div.panel', editor.element, h('div.row', save, remove), slot),
    conflictSlot, attachmentsSlot, historySlot);

  if (conflicts.length) await renderConflicts(conflictSlot, db, id, doc, conflicts, again);
  renderAttachments(attachmentsSlot, db, id, doc, again);
  renderHistory(historySlot, db, id, history, deletedConflicts);
}

async function newDocument(main, db, crumbs) {
  let uuid = '';
  try { uuid = (await get('/_uuids')).uuids[0]; } catch { /* an ID can be typed */ }
  const editor = codeEditor({ id: 'doc-editor', label: 'Document JSON', value: JSON.stringify({ _id: uuid }, null, 2), rows: 20 });
  const slot = h('div#doc-errors');
  const create = h('button.primary#save-doc', { type: 'button', text: 'Create document' });
  create.addEventListener('click', async () => {
    const problem = editor.check();
    if (problem) { report(slot, new Error(`Not JSON (line ${problem.line + 1}): ${problem.message}`)); return; }
    const body = JSON.parse(editor.value);
    try {
      const answer = body && typeof body._id === 'string' && body._id
        ? await put(docPath(db, body._id), body) : await post(`/${enc(db)}`, body);
      notify(`Created ${answer.id}`);
      location.hash = link('db', db, 'doc', answer.id);
    } catch (error) { report(slot, error); }
  });
  show(main, crumbs, h('h1', { text: 'New document' }),
    h('div.panel', editor.element, h('div.row', create), slot));
  editor.focus();
}

/** The winner and every losing revision side by side; fields that differ are highlighted. */
async function renderConflicts(container, db, id, doc, conflicts, again) {
  const revisions = [doc, ...await Promise.all(conflicts.map((rev) => get(docPath(db, id), { rev })))];
  const hidden = new Set(['_id', '_rev', '_revisions', '_revs_info', '_conflicts', '_deleted_conflicts']);
  const keys = [];
  for (const revision of revisions) for (const key of Object.keys(revision)) if (!hidden.has(key) && !keys.includes(key)) keys.push(key);
  const slot = h('div');
  const columns = revisions.map((revision, index) => {
    const keep = h('button.primary', { type: 'button', text: 'Keep this one', 'aria-label': `Keep revision ${revision._rev} and delete the others`,
      dataset: { rev: revision._rev } });
    keep.addEventListener('click', async () => {
      const others = revisions.filter((other) => other._rev !== revision._rev);
      const ok = await confirmDialog({ title: `Keep ${revision._rev}?`,
        message: `The other ${others.length} revision${others.length > 1 ? 's are' : ' is'} deleted, leaving ${revision._rev} the only one.`, confirmLabel: 'Keep it, delete the others' });
      if (!ok) return;
      try {
        // One request: each other leaf gets a deleted successor, so the kept one wins.
        const results = await post(`/${enc(db)}/_bulk_docs`, { docs: others.map((other) => ({ _id: id, _rev: other._rev, _deleted: true })) });
        const failed = results.filter((result) => result.error);
        if (failed.length) throw new Error(failed.map((result) => `${result.error}: ${result.reason}`).join('; '));
        notify(`Kept ${revision._rev}`);
        await again();
      } catch (error) { report(slot, error); }
    });
    return h('article.revision', { dataset: { rev: revision._rev } },
      h('h3', { text: `${index === 0 ? 'Winner' : 'Losing'}: ${revision._rev}` }),
      h('dl', keys.map((key) => {
        const texts = revisions.map((other) => (key in other ? JSON.stringify(other[key], null, 1) : undefined));
        const differs = texts.some((text) => text !== texts[0]);
        return [h('dt', { text: key }), h(differs ? 'dd.differs' : 'dd', { dataset: { field: key }, title: differs ? 'differs between revisions' : null,
          text: key in revision ? JSON.stringify(revision[key], null, 1) : '(absent)' })];
      })),
      h('div', keep));
  });
  show(container, h('h2#conflicts-title', { text: 'Conflicts' }),
    h('p.muted', { text: 'Highlighted fields differ between revisions. Keeping one deletes every other.' }),
    slot, h('div.conflicts', columns));
}

function renderAttachments(container, db, id, doc, again) {
  const attachments = Object.entries(doc._attachments || {});
  const file = h('input#attachment-file', { type: 'file' });
  const name = h('input#attachment-name', { type: 'text', autocomplete: 'off', placeholder: 'the file’s name' });
  const progress = h('progress#upload-progress', { max: 1, value: 0, hidden: true, 'aria-label': 'Upload progress' });
  const slot = h('div');
  const form = h('form.row', { id: 'upload-form', 'aria-label': 'Upload an attachment' },
    field('File', file), field('Attachment name', name), h('button.primary', { type: 'submit', text: 'Upload' }), progress);
  file.addEventListener('change', () => { if (file.files[0] && !name.value) name.value = file.files[0].name; });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) { report(slot, new Error('Choose a file first')); return; }
    progress.hidden = false;
    progress.value = 0;
    try {
      await upload(`${docPath(db, id)}/${attachmentPath(name.value || chosen.name)}?rev=${enc(doc._rev)}`, chosen,
        (fraction) => { progress.value = fraction; });
      notify(`Uploaded ${name.value || chosen.name}`);
      await again();
    } catch (error) { report(slot, error); }
  });
  const rows = attachments.map(([attachment, stub]) => {
    const href = `${docPath(db, id)}/${attachmentPath(attachment)}`;
    const remove = h('button', { type: 'button', text: 'Delete', 'aria-label': `Delete attachment ${attachment}` });
    remove.addEventListener('click', async () => {
      const ok = await confirmDialog({ title: `Delete ${attachment}?`, message: `A new revision of ${id} without ${attachment} is written.`, confirmLabel: `Delete ${attachment}` });
      if (!ok) return;
      try { await del(href, { rev: doc._rev }); await again(); } catch (error) { report(slot, error); }
    });
    return h('tr', { dataset: { attachment } },
      h('th', { scope: 'row', text: attachment }),
      h('td', { text: stub.content_type || '' }),
      h('td.num', { text: formatBytes(stub.length) }),
      h('td', h('a', { href, download: attachment, text: 'Download', 'aria-label': `Download ${attachment}` }), ' ', remove));
  });
  show(container, h('h2#attachments-title', { text: 'Attachments' }),
    rows.length ? h('div.table-wrap', h('table#attachments', h('thead', h('tr', h('th', { scope: 'col', text: 'Name' }),
      h('th', { scope: 'col', text: 'Type' }), h('th.num', { scope: 'col', text: 'Size' }), h('th', { scope: 'col', text: 'Actions' }))),
    h('tbody', rows))) : h('p.muted', { text: 'No attachments.' }),
    h('div.panel', form, slot));
}

/** Attachment names keep their `/` between encoded parts, as CouchDB reads them. */
const attachmentPath = (name) => name.split('/').map(enc).join('/');

function renderHistory(container, db, id, history, deletedConflicts) {
  const viewer = h('pre.panel.mono#revision-view', { hidden: true, tabindex: '0' });
  const rows = history.map((entry) => {
    const view = h('button', { type: 'button', text: 'View', disabled: entry.status !== 'available', 'aria-label': `View revision ${entry.rev}` });
    view.addEventListener('click', async () => {
      try {
        const revision = await get(docPath(db, id), { rev: entry.rev });
        viewer.hidden = false;
        viewer.textContent = `${entry.rev}\n${JSON.stringify(revision, null, 2)}`;
        viewer.focus();
      } catch (error) { viewer.hidden = false; viewer.textContent = error.shown || String(error); }
    });
    return h('tr', h('td', h('code', { text: entry.rev })), h('td', { text: entry.status }), h('td', view));
  });
  show(container, h('h2#history-title', { text: 'Revision history' }),
    h('div.table-wrap', h('table#history', h('thead', h('tr', h('th', { scope: 'col', text: 'Revision' }),
      h('th', { scope: 'col', text: 'Status' }), h('th', { scope: 'col', text: 'Body' }))), h('tbody', rows))),
    deletedConflicts.length ? h('p.muted', { text: `Deleted conflicts: ${deletedConflicts.join(', ')}` }) : null,
    viewer);
}

