// The databases: a paged, searchable list with counts, sizes and sequences; create; delete.
import { get, post, put, del, enc } from './api.js';
import { h, show, field, checkbox, report, notify, confirmDialog, formatBytes, seqNumber, pager, link } from './ui.js';

const pageSize = 20;

export async function databasesScreen(main) {
  let names = [];
  let skip = 0;
  const search = h('input', { type: 'search', placeholder: 'part of a name', autocomplete: 'off' });
  const newName = h('input', { type: 'text', name: 'db-name', autocomplete: 'off', spellcheck: 'false', required: true });
  const createSlot = h('div');
  const listSlot = h('div');
  const partitioned = checkbox('Partitioned', { id: 'create-db-partitioned' });
  const createForm = h('form.row', { id: 'create-db', 'aria-label': 'Create a database' },
    field('New database name', newName), partitioned.element, h('button.primary', { type: 'submit', text: 'Create database' }));
  show(main, h('h1', { text: 'Databases' }),
    h('div.panel', createForm, createSlot),
    h('div.row', field('Search databases', search)),
    listSlot);

  createForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      // A partitioned database's documents are all "partition:id" (PUT /db?partitioned=true).
      await put(`/${enc(newName.value)}`, undefined, { partitioned: partitioned.input.checked || undefined });
      const name = newName.value;
      newName.value = '';
      partitioned.input.checked = false;
      report(createSlot, null);
      notify(`Database ${name} created`);
      location.hash = link('db', name);
    } catch (error) { report(createSlot, error); }
  });
  search.addEventListener('input', () => { skip = 0; renderPage(); });

  async function load() {
    names = await get('/_all_dbs');
    await renderPage();
  }

  let latest = 0;
  async function renderPage() {
    // Typing starts a render per key: only the last one may show its answer.
    const mine = ++latest;
    const term = search.value.trim().toLowerCase();
    const matching = names.filter((name) => name.toLowerCase().includes(term));
    const page = matching.slice(skip, skip + pageSize);
    let infos;
    try {
      // CouchDB 3.2+ answers many databases' information at once.
      const rows = page.length ? await post('/_dbs_info', { keys: page }) : [];
      infos = rows.map((row) => row.info || null);
    } catch {
      infos = await Promise.all(page.map((name) => get(`/${enc(name)}`).catch(() => null)));
    }
    if (mine !== latest) return;
    const rows = page.map((name, index) => {
      const info = infos[index] || {};
      const sizes = info.sizes || {};
      return h('tr', { dataset: { db: name } },
        h('th', { scope: 'row' }, h('a', { href: link('db', name), text: name }),
          info.props?.partitioned ? [' ', h('span.badge', { text: 'partitioned' })] : null),
        h('td.num', { text: info.doc_count ?? '–' }),
        h('td.num.hide-narrow', { text: info.doc_del_count ?? '–' }),
        h('td.num', { text: formatBytes(sizes.file), title: `active ${formatBytes(sizes.active)}, documents ${formatBytes(sizes.external)}` }),
        h('td.num.hide-narrow', { text: seqNumber(info.update_seq), title: String(info.update_seq ?? '') }),
        h('td', h('button', { type: 'button', text: 'Delete', 'aria-label': `Delete database ${name}`,
          on: { click: () => deleteDatabase(name) } })));
    });
    show(listSlot,
      h('div.table-wrap', h('table', { id: 'databases' },
        h('caption.muted', { text: `${matching.length} database${matching.length === 1 ? '' : 's'}${term ? ` matching “${term}”` : ''}` }),
        h('thead', h('tr', h('th', { scope: 'col', text: 'Name' }), h('th.num', { scope: 'col', text: 'Documents' }),
          h('th.num.hide-narrow', { scope: 'col', text: 'Deleted' }), h('th.num', { scope: 'col', text: 'Size' }),
          h('th.num.hide-narrow', { scope: 'col', text: 'Update seq' }), h('th', { scope: 'col', text: 'Actions' }))),
        h('tbody', rows))),
      pager({ skip, size: pageSize, shown: page.length, total: matching.length, label: 'Database pages',
        onPage: (next) => { skip = next; renderPage(); } }));
  }

  async function deleteDatabase(name) {
    const confirmed = await confirmDialog({ title: `Delete the database ${name}?`,
      message: `Every document of ${name} is lost. This cannot be undone.`, confirmLabel: `Delete ${name}`, typed: name });
    if (!confirmed) return;
    try {
      await del(`/${enc(name)}`);
      notify(`Database ${name} deleted`);
      await load();
    } catch (error) { report(createSlot, error); }
  }

  await load();
}
