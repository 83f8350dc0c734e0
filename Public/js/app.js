// The page's shell: who is signed in, and which screen the address (#/...) shows.
import { get, post, del, CouchError } from './api.js';
import { h, show, field, errorBox } from './ui.js';
import { databasesScreen } from './databases.js';
import { databaseScreen } from './documents.js';
import { documentScreen } from './document.js';
import { replicationScreen } from './replication.js';
import { serverScreen } from './server.js';

export const session = { name: null, roles: [], adminParty: false, loaded: false };
const isAdmin = () => session.roles.includes('_admin');

async function loadSession() {
  try {
    const answer = await get('/_session');
    session.name = answer.userCtx.name;
    session.roles = answer.userCtx.roles || [];
    // Admin party: every client is an admin without having signed in.
    session.adminParty = session.name === null && session.roles.includes('_admin');
  } catch {
    session.name = null; session.roles = []; session.adminParty = false;
  }
  session.loaded = true;
  renderSession();
}

function renderSession() {
  const box = document.getElementById('session');
  if (session.adminParty) {
    show(box, h('span.badge.warn', { title: 'No server admin is configured: every client is an admin.', text: 'Admin party' }),
      h('span', { text: 'everyone is an admin' }));
    return;
  }
  if (session.name) {
    show(box, h('span', { id: 'signed-in' }, 'Signed in as ', h('strong', { text: session.name })),
      isAdmin() ? h('span.badge', { text: 'server admin' }) : null,
      h('button', { type: 'button', id: 'sign-out', text: 'Sign out', on: { click: signOut } }));
    return;
  }
  const name = h('input', { type: 'text', name: 'name', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const slot = h('div');
  const form = h('form', { id: 'sign-in', 'aria-label': 'Sign in' }, field('Name', name), field('Password', password),
    h('button.primary', { type: 'submit', text: 'Sign in' }), slot);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await post('/_session', { name: name.value, password: password.value });
      password.value = '';
      await loadSession();
      route();
    } catch (error) {
      show(slot, errorBox(error));
    }
  });
  show(box, form);
}

async function signOut() {
  try { await del('/_session'); } catch { /* signed out either way */ }
  await loadSession();
  route();
}

const routes = [
  [/^\/?$/, 'databases', () => databasesScreen],
  [/^\/replication$/, 'replication', () => replicationScreen],
  [/^\/server$/, 'server', () => serverScreen],
  [/^\/db\/([^/]+)\/doc\/(.+)$/, 'databases', () => documentScreen],
  [/^\/db\/([^/]+)\/new$/, 'databases', () => documentScreen],
  [/^\/db\/([^/]+)(?:\/(changes|security|find))?$/, 'databases', () => databaseScreen],
];

let cleanup = null;
let generation = 0;

/** Renders the screen the address names; the previous screen's feeds are closed first. */
export async function route() {
  const current = ++generation;
  if (cleanup) { try { cleanup(); } catch { /* closing anyway */ } cleanup = null; }
  const path = location.hash.replace(/^#/, '') || '/';
  const main = document.getElementById('main');
  for (const [pattern, section, screen] of routes) {
    const match = path.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll('.top nav a')) {
      if (link.dataset.section === section) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
    }
    const params = match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part)));
    main.replaceChildren();
    try {
      const result = await screen()(main, params, { session, isNew: path.endsWith('/new') });
      if (current === generation) cleanup = typeof result === 'function' ? result : null;
      else if (typeof result === 'function') result();
    } catch (error) {
      if (current !== generation) return;
      show(main, h('h1', { text: 'Something went wrong' }), errorBox(error),
        error instanceof CouchError && (error.status === 401 || error.status === 403)
          ? h('p', { text: 'Sign in (top right) with an account allowed to see this.' }) : null);
    }
    return;
  }
  show(main, h('h1', { text: 'No such page' }), h('p', h('a', { href: '#/', text: 'Back to the databases' })));
}

window.addEventListener('hashchange', () => {
  document.getElementById('notice').hidden = true;
  route(); document.getElementById('main').focus({ preventScroll: true }); });
loadSession().then(route);
