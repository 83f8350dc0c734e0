// A database's changes as they happen (`_changes?feed=eventsource`), pausable.
import { enc } from './api.js';
import { h, show, link, seqNumber } from './ui.js';

const kept = 200;

export function changesView(container, db) {
  let source = null;
  let since = 'now';
  const state = h('span.badge#changes-state', { text: 'connecting' });
  const toggle = h('button#changes-toggle', { type: 'button', text: 'Pause' });
  const list = h('ol.changes#changes-list', { 'aria-live': 'polite', 'aria-label': 'Changes, newest first' });
  show(container, h('div.row', toggle, state, h('span.muted', { text: 'Newest first; changes made while paused arrive on resuming.' })), list);

  function open() {
    const url = `/${enc(db)}/_changes?feed=eventsource&heartbeat=10000&style=all_docs&since=${enc(since)}`;
    source = new EventSource(url, { withCredentials: true });
    source.onopen = () => { state.textContent = 'live'; state.className = 'badge good'; };
    source.onerror = () => {
      // EventSource reconnects by itself (sending Last-Event-ID); say so meanwhile.
      state.textContent = source && source.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting';
      state.className = 'badge warn';
    };
    source.onmessage = (event) => {
      let change;
      try { change = JSON.parse(event.data); } catch { return; }
      if (change.last_seq !== undefined && change.id === undefined) return;
      since = change.seq ?? since;
      const revs = (change.changes || []).map((entry) => entry.rev).join(', ');
      list.prepend(h('li', { dataset: { id: change.id } },
        h('span.mono', { text: seqNumber(change.seq), title: String(change.seq) }),
        h('a', { href: link('db', db, 'doc', change.id), text: change.id }),
        h('code', { text: revs }),
        change.deleted ? h('span.badge.bad', { text: 'deleted' }) : null,
        h('span.muted', { text: new Date().toLocaleTimeString() })));
      while (list.children.length > kept) list.lastElementChild.remove();
    };
  }

  function close() {
    if (source) source.close();
    source = null;
  }

  toggle.addEventListener('click', () => {
    if (source) {
      close();
      toggle.textContent = 'Resume';
      state.textContent = 'paused';
      state.className = 'badge warn';
    } else {
      toggle.textContent = 'Pause';
      state.textContent = 'connecting';
      open();
    }
  });
  open();
  return close;
}
