// A database's upkeep: compaction (the database, each design document's views), view cleanup,
// `_revs_limit`, and purging chosen leaf revisions of a document.
import { get, post, put, docPath, enc } from './api.js';
import { h, show, field, report, notify, confirmDialog, formatBytes, seqNumber } from './ui.js';

export async function maintenanceView(container, db) {
  const sizes = h('p.muted#db-sizes');
  const compactSlot = h('div#compact-result', { 'aria-live': 'polite' });
  const compactDb = h('button.primary#compact-db', { type: 'button', text: 'Compact the database' });
  const cleanup = h('button#view-cleanup', { type: 'button', text: 'Clean up old view indexes' });
  const viewsSlot = h('div');
  const revsLimit = h('input#revs-limit', { type: 'number', min: 1, step: 1, required: true });
  const revsForm = h('form.row#revs-limit-form', { 'aria-label': 'Revisions limit' },
    field('Revisions kept per document (_revs_limit)', revsLimit), h('button', { type: 'submit', text: 'Set limit' }));
  const revsSlot = h('div');
  const purgeId = h('input#purge-id', { type: 'text', autocomplete: 'off', spellcheck: 'false', required: true });
  const purgeForm = h('form.row#purge-form', { 'aria-label': 'Purge revisions' },
    field('Document ID', purgeId), h('button', { type: 'submit', text: 'Show its leaf revisions' }));
  const purgeSlot = h('div#purge-revisions');

  async function refreshInfo() {
    const info = await get(`/${enc(db)}`);
    sizes.textContent = `File ${formatBytes(info.sizes?.file)}, live data ${formatBytes(info.sizes?.active)}, ` +
      `documents ${formatBytes(info.sizes?.external)}; purge seq ${seqNumber(info.purge_seq)}` +
      (info.compact_running ? '; compacting…' : '');
    sizes.dataset.compacting = info.compact_running ? 'yes' : 'no';
    return info;
  }

  /** Waits for the database's compaction to end, showing the sizes before and after. */
  async function followCompaction(before) {
    for (let i = 0; i < 600; i += 1) {
      const info = await refreshInfo();
      if (!info.compact_running) {
        show(compactSlot, h('p#compact-done', h('span.badge.good', { text: 'compacted' }),
          ` File ${formatBytes(before.sizes?.file)} → ${formatBytes(info.sizes?.file)}.`));
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      if (!container.isConnected) return;
    }
  }

  compactDb.addEventListener('click', async () => {
    try {
      const before = await refreshInfo();
      await post(`/${enc(db)}/_compact`, {});
      show(compactSlot, h('p.muted', { text: 'Compacting… (see Active tasks)' }));
      await followCompaction(before);
    } catch (error) { report(compactSlot, error); }
  });
  cleanup.addEventListener('click', async () => {
    try {
      await post(`/${enc(db)}/_view_cleanup`, {});
      show(compactSlot, h('p', h('span.badge.good', { text: 'cleaned up' }), ' Index files of views no design document defines are removed.'));
    } catch (error) { report(compactSlot, error); }
  });

  async function loadViews() {
    const answer = await get(`/${enc(db)}/_design_docs`, { include_docs: true });
    const rows = answer.rows.filter((row) => row.doc && Object.keys(row.doc.views || {}).length).map((row) => {
      const name = row.id.slice('_design/'.length);
      const button = h('button', { type: 'button', text: 'Compact views', 'aria-label': `Compact the views of ${name}` });
      const state = h('span.muted');
      button.addEventListener('click', async () => {
        try {
          await post(`/${enc(db)}/_compact/${enc(name)}`, {});
          state.textContent = 'compaction started';
          state.className = 'badge good';
          state.dataset.started = 'yes';
        } catch (error) { report(compactSlot, error); }
      });
      return h('tr', { dataset: { ddoc: name } }, h('th', { scope: 'row', text: row.id }),
        h('td', { text: row.doc.language === 'query' ? 'Mango indexes' : Object.keys(row.doc.views).join(', ') }), h('td', button, ' ', state));
    });
    show(viewsSlot, rows.length ? h('div.table-wrap', h('table#view-compaction', h('thead', h('tr', ['Design document', 'Views', 'Compaction']
      .map((text) => h('th', { scope: 'col', text })))), h('tbody', rows))) : h('p.muted', { text: 'No views to compact.' }));
  }

  revsForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await put(`/${enc(db)}/_revs_limit`, Number(revsLimit.value));
      report(revsSlot, null);
      notify(`_revs_limit set to ${revsLimit.value}`);
    } catch (error) { report(revsSlot, error); }
  });

  purgeForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = purgeId.value;
    let leaves;
    try {
      leaves = await get(docPath(db, id), { open_revs: 'all' });
    } catch (error) { report(purgeSlot, error); return; }
    const found = leaves.filter((leaf) => leaf.ok).map((leaf) => leaf.ok);
    if (!found.length) { show(purgeSlot, h('p.muted', { text: `${id} has no revision.` })); return; }
    const boxes = found.map((leaf) => {
      const input = h('input', { type: 'checkbox', value: leaf._rev, id: `purge-${leaf._rev}` });
      return { input, element: h('li', h('label.inline', { for: input.id }, input, ' ', h('code', { text: leaf._rev }), ' ',
        leaf._deleted ? h('span.badge.bad', { text: 'deleted' }) : h('span.muted', { text: JSON.stringify(leaf).slice(0, 80) }))) };
    });
    const slot = h('div');
    const purge = h('button.danger#purge-selected', { type: 'button', text: 'Purge the selected revisions' });
    purge.addEventListener('click', async () => {
      const revs = boxes.filter((box) => box.input.checked).map((box) => box.input.value);
      if (!revs.length) { report(slot, new Error('Select at least one revision')); return; }
      const ok = await confirmDialog({ title: `Purge ${revs.length} revision${revs.length > 1 ? 's' : ''} of ${id}?`,
        message: 'Purged revisions vanish as if never written: from this database, its changes feed and so from replication. This cannot be undone.',
        confirmLabel: 'Purge' });
      if (!ok) return;
      try {
        const answer = await post(`/${enc(db)}/_purge`, { [id]: revs });
        const purged = answer.purged?.[id] || [];
        show(purgeSlot, h('p#purge-outcome', h('span.badge.good', { text: 'purged' }), ` ${purged.join(', ') || 'nothing'}`));
        await refreshInfo();
      } catch (error) { report(slot, error); }
    });
    show(purgeSlot, h('fieldset.panel', h('legend', { text: `Leaf revisions of ${id}` }), h('ul.plain', boxes.map((box) => box.element)), purge, slot));
  });

  show(container,
    h('section', { 'aria-labelledby': 'compaction-title' }, h('h2#compaction-title', { text: 'Compaction' }), sizes,
      h('div.row', compactDb, cleanup), compactSlot, viewsSlot),
    h('section', { 'aria-labelledby': 'revs-title' }, h('h2#revs-title', { text: 'Revisions limit' }),
      h('p.muted', { text: 'How many old revision IDs each document keeps (1000 by default); older ones go at the next compaction.' }),
      h('div.panel', revsForm, revsSlot)),
    h('section', { 'aria-labelledby': 'purge-title' }, h('h2#purge-title', { text: 'Purge' }),
      h('p.muted', { text: 'Removes chosen leaf revisions as if they had never been written (POST /db/_purge).' }),
      h('div.panel', purgeForm, purgeSlot)));
  const [limit] = await Promise.all([get(`/${enc(db)}/_revs_limit`), refreshInfo(), loadViews()]);
  revsLimit.value = limit;
}
