// The page's shell: who is signed in, and which screen the address (#/...) shows.
import { get, post, del, CouchError } from './api.js';
import { h, show, field, errorBox } from './ui.js';
import { databasesScreen } from './databases.js';
import { databaseScreen } from './documents.js';
import { documentScreen } from './document.js';
import { replicationScreen } from './replication.js';
import { serverScreen } from './server.js';
import { syncScreen } from './sync.js';
import { tasksScreen } from './tasks.js';
import { designScreen } from './design.js';
import { viewScreen } from './views.js';
import { loadCodeMirror } from './editor.js';

export const session = { name: null, roles: [], adminParty: false, loaded: false, anonymous: false };
const isAdmin = () => session.roles.includes('_admin');
/** Whether the screens may be drawn: someone signed in, an admin party, or a user who chose
 *  to go on without signing in (a server may let anonymous users read public databases). */
const mayBrowse = () => session.name !== null || session.adminParty || session.anonymous;

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
  document.getElementById('admin-party').hidden = !session.adminParty;
  if (session.adminParty) {
    show(box, h('span.badge.warn', { title: 'No server admin is configured: every client is an admin.', text: 'Admin party' }));
    return;
  }
  if (session.name) {
    show(box, h('span', { id: 'signed-in' }, 'Signed in as ', h('strong', { text: session.name })),
      isAdmin() ? h('span.badge', { text: 'server admin' }) : null,
      h('button', { type: 'button', id: 'sign-out', text: 'Sign out', on: { click: signOut } }));
    return;
  }
  show(box, h('span.muted', { text: 'Not signed in' }),
    h('button', { type: 'button', id: 'go-sign-in', text: 'Sign in', on: { click: () => { session.anonymous = false; route(); } } }));
}

/** The first screen when the server wants a user: a sign-in form, with why when a screen was refused. */
function signInScreen(main, refused) {
  const name = h('input', { type: 'text', name: 'name', autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true });
  const slot = h('div');
  const form = h('form.panel.sign-in#sign-in', { 'aria-labelledby': 'sign-in-title' },
    h('h1#sign-in-title', { text: 'Sign in' }),
    h('p.muted', { text: refused
      ? `The server answered ${refused.status} (${refused.message}): sign in with an account allowed to see this.`
      : 'This server needs a user: sign in with a server admin, or with a user of _users.' }),
    field('Name', name), field('Password', password),
    h('div.row', h('button.primary', { type: 'submit', text: 'Sign in' }),
      h('button', { type: 'button', id: 'continue-anonymous', text: 'Continue without signing in',
        on: { click: () => { session.anonymous = true; route(); } } })),
    slot);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await post('/_session', { name: name.value, password: password.value });
      password.value = '';
      session.anonymous = false;
      await loadSession();
      route();
    } catch (error) {
      show(slot, errorBox(error));
      password.select();
    }
  });
  show(main, form);
  name.focus();
}

async function signOut() {
  try { await del('/_session'); } catch { /* signed out either way */ }
  session.anonymous = false;
  await loadSession();
  route();
}

const routes = [
  [/^\/?$/, 'databases', () => databasesScreen],
  [/^\/replication$/, 'replication', () => replicationScreen],
  [/^\/sync$/, 'sync', () => syncScreen],
  [/^\/tasks$/, 'tasks', () => tasksScreen],
  [/^\/server$/, 'server', () => serverScreen],
  [/^\/db\/([^/]+)\/doc\/(.+)$/, 'databases', () => documentScreen],
  [/^\/db\/([^/]+)\/new$/, 'databases', () => documentScreen, true],
  [/^\/db\/([^/]+)\/design\/([^/]+)$/, 'databases', () => designScreen],
  [/^\/db\/([^/]+)\/new-design$/, 'databases', () => designScreen, true],
  [/^\/db\/([^/]+)\/view\/([^/]+)\/([^/]+)$/, 'databases', () => viewScreen],
  [/^\/db\/([^/]+)(?:\/(changes|security|design|mango|maintenance))?$/, 'databases', () => databaseScreen],
];

let cleanup = null;
let generation = 0;

/** Renders the screen the address names; the previous screen's feeds are closed first. */
export async function route() {
  const current = ++generation;
  if (cleanup) { try { cleanup(); } catch { /* closing anyway */ } cleanup = null; }
  const path = location.hash.replace(/^#/, '') || '/';
  const main = document.getElementById('main');
  if (!session.loaded) return;
  if (!mayBrowse()) { signInScreen(main); return; }
  for (const [pattern, section, screen, isNew] of routes) {
    const match = path.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll('.top nav a')) {
      if (link.dataset.section === section) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
    }
    const params = match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part)));
    main.replaceChildren();
    try {
      // Only the "new" routes create: a document may well be called "new".
      const result = await screen()(main, params, { session, isNew: !!isNew });
      if (current === generation) cleanup = typeof result === 'function' ? result : null;
      else if (typeof result === 'function') result();
    } catch (error) {
      if (current !== generation) return;
      // Refused for want of a user: the sign-in screen says so (a signed-in user's 403 is shown).
      if (error instanceof CouchError && (error.status === 401 || (error.status === 403 && !session.name && !session.adminParty))) {
        signInScreen(main, error);
        return;
      }
      show(main, h('h1', { text: 'Something went wrong' }), errorBox(error));
    }
    return;
  }
  show(main, h('h1', { text: 'No such page' }), h('p', h('a', { href: '#/', text: 'Back to the databases' })));
}

window.addEventListener('hashchange', () => {
  document.getElementById('notice').hidden = true;
  route(); document.getElementById('main').focus({ preventScroll: true }); });
loadCodeMirror();
loadSession().then(route);
