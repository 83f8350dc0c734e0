// The server: health figures, users and configuration (active tasks have a screen of their own).
import { get, put, del, docPath, enc } from './api.js';
import { h, show, field, report, notify, errorBox, formatBytes, splitList, confirmDialog } from './ui.js';

export async function serverScreen(main) {
  const health = h('section', { 'aria-labelledby': 'health-title' });
  const users = h('section', { 'aria-labelledby': 'users-title' });
  const config = h('section', { 'aria-labelledby': 'config-title' });
  show(main, h('h1', { text: 'Server' }), health, h('p', h('a', { href: '#/tasks', text: 'Active tasks (compactions, indexing, replications)' })), users, config);
  const refresh = () => renderHealth(health);
  await Promise.all([refresh(), renderUsers(users), renderConfig(config)]);
  const timer = setInterval(refresh, 5000);
  return () => clearInterval(timer);
}

async function settle(promise) {
  try { return { value: await promise }; } catch (error) { return { error }; }
}

async function renderHealth(container) {
  const [welcome, up, stats, system] = await Promise.all([
    settle(get('/')), settle(get('/_up')), settle(get('/_node/_local/_stats')), settle(get('/_node/_local/_system'))]);
  const figure = (label, value, id) => h('div.stat', { id }, h('span.muted', { text: label }), h('b', { text: value ?? '–' }));
  const s = stats.value || {};
  const counter = (...path) => { let value = s; for (const part of path) value = value?.[part]; return value?.value; };
  show(container, h('h2#health-title', { text: 'Health' }),
    h('div.stats',
      figure('Status (_up)', up.value ? up.value.status : (up.error?.body?.status || up.error?.message), 'health-up'),
      figure('Version', welcome.value ? `${welcome.value.vendor?.name || 'CouchDB'} ${welcome.value.version}` : null),
      figure('Uptime', system.value ? `${Math.round(system.value.uptime / 60)} min` : null),
      figure('Memory (resident)', system.value?.memory?.resident !== undefined ? formatBytes(system.value.memory.resident) : null),
      figure('Requests', counter('couchdb', 'httpd', 'requests')),
      figure('Open databases', counter('couchdb', 'open_databases')),
      figure('Documents read', counter('couchdb', 'database_reads')),
      figure('Documents written', counter('couchdb', 'database_writes'))),
    stats.error ? h('p.muted', { text: `Statistics need a server admin (${stats.error.message}).` }) : null);
}

const userPrefix = 'org.couchdb.user:';

async function renderUsers(container) {
  const again = () => renderUsers(container);
  const slot = h('div');
  const name = h('input#new-user-name', { type: 'text', autocomplete: 'off', required: true });
  const password = h('input#new-user-password', { type: 'password', autocomplete: 'new-password', required: true });
  const roles = h('input#new-user-roles', { type: 'text', autocomplete: 'off', placeholder: 'comma-separated' });
  const form = h('form.row#create-user', { 'aria-label': 'Create a user' },
    field('User name', name), field('Password', password), field('Roles', roles), h('button.primary', { type: 'submit', text: 'Create user' }));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await put(docPath('_users', userPrefix + name.value), { _id: userPrefix + name.value, name: name.value, type: 'user', roles: splitList(roles.value), password: password.value });
      password.value = '';
      notify(`User ${name.value} created`);
      await again();
    } catch (error) { report(slot, error); }
  });
  const answer = await settle(get('/_users/_all_docs', { include_docs: 'true', startkey: JSON.stringify(userPrefix), endkey: JSON.stringify(`${userPrefix}\ufff0`) }));
  const rows = (answer.value?.rows || []).map((row) => userRow(row.doc, slot, again));
  show(container, h('h2#users-title', { text: 'Users (_users)' }), h('div.panel', form, slot),
    answer.error ? errorBox(answer.error) : rows.length
      ? h('div.table-wrap', h('table#users', h('thead', h('tr', ['Name', 'Roles', 'New password', 'Actions'].map((text) => h('th', { scope: 'col', text })))), h('tbody', rows)))
      : h('p.muted', { text: 'No users.' }));
}

function userRow(doc, slot, again) {
  const roles = h('input', { type: 'text', autocomplete: 'off', value: (doc.roles || []).join(', '), 'aria-label': `Roles of ${doc.name}` });
  const password = h('input', { type: 'password', autocomplete: 'new-password', 'aria-label': `New password for ${doc.name}` });
  const save = h('button', { type: 'button', text: 'Save', 'aria-label': `Save ${doc.name}` });
  save.addEventListener('click', async () => {
    const updated = { ...doc, roles: splitList(roles.value) };
    if (password.value) updated.password = password.value;
    try {
      await put(docPath('_users', doc._id), updated);
      password.value = '';
      notify(`Saved ${doc.name}`);
      await again();
    } catch (error) { report(slot, error); }
  });
  const remove = h('button.danger', { type: 'button', text: 'Delete', 'aria-label': `Delete user ${doc.name}` });
  remove.addEventListener('click', async () => {
    if (!await confirmDialog({ title: `Delete the user ${doc.name}?`, message: 'They can no longer sign in.', confirmLabel: `Delete ${doc.name}` })) return;
    try { await del(docPath('_users', doc._id), { rev: doc._rev }); await again(); } catch (error) { report(slot, error); }
  });
  return h('tr', { dataset: { user: doc.name } }, h('th', { scope: 'row', text: doc.name }), h('td', roles), h('td', password), h('td', save, ' ', remove));
}

async function renderConfig(container) {
  const again = () => renderConfig(container);
  const answer = await settle(get('/_node/_local/_config'));
  const slot = h('div');
  if (answer.error) {
    show(container, h('h2#config-title', { text: 'Configuration' }), errorBox(answer.error));
    return;
  }
  const section = h('input#config-section', { type: 'text', autocomplete: 'off', required: true });
  const key = h('input#config-key', { type: 'text', autocomplete: 'off', required: true });
  const value = h('input#config-value', { type: 'text', autocomplete: 'off' });
  const form = h('form.row#config-form', { 'aria-label': 'Set a configuration value' },
    field('Section', section), field('Key', key), field('Value', value), h('button.primary', { type: 'submit', text: 'Set value' }));
  const setValue = async (s, k, v) => {
    try {
      await put(`/_node/_local/_config/${enc(s)}/${enc(k)}`, v);
      notify(`${s}/${k} set`);
      await again();
    } catch (error) { report(slot, error); }
  };
  form.addEventListener('submit', (event) => { event.preventDefault(); setValue(section.value, key.value, value.value); });
  const rows = [];
  for (const [sectionName, entries] of Object.entries(answer.value)) {
    for (const [keyName, current] of Object.entries(entries)) {
      const input = h('input', { type: 'text', autocomplete: 'off', value: current, 'aria-label': `${sectionName}/${keyName}` });
      const save = h('button', { type: 'button', text: 'Save', 'aria-label': `Save ${sectionName}/${keyName}`, on: { click: () => setValue(sectionName, keyName, input.value) } });
      const remove = h('button', { type: 'button', text: 'Delete', 'aria-label': `Delete ${sectionName}/${keyName}`, on: { click: async () => {
        try { await del(`/_node/_local/_config/${enc(sectionName)}/${enc(keyName)}`); await again(); } catch (error) { report(slot, error); }
      } } });
      rows.push(h('tr', h('td', { text: sectionName }), h('th', { scope: 'row', text: keyName }), h('td', input), h('td', save, ' ', remove)));
    }
  }
  show(container, h('h2#config-title', { text: 'Configuration (_node/_local/_config)' }), h('div.panel', form, slot),
    h('details', h('summary', { text: `${rows.length} values` }),
      h('div.table-wrap', h('table#config', h('thead', h('tr', ['Section', 'Key', 'Value', 'Actions'].map((text) => h('th', { scope: 'col', text })))), h('tbody', rows)))));
}

