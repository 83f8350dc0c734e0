// Small DOM helpers shared by the screens.
import { CouchError } from './api.js';

/** h('tag.class#id', {attributes, on: {event}}, ...children): an element. */
export function h(spec, props, ...children) {
  const [, tag, rest] = spec.match(/^([a-z0-9]+)(.*)$/i);
  const element = document.createElement(tag);
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === '.') element.classList.add(part.slice(1)); else element.id = part.slice(1);
  }
  if (props && (typeof props !== 'object' || props instanceof Node || Array.isArray(props))) {
    children.unshift(props);
    props = null;
  }
  for (const [key, value] of Object.entries(props || {})) {
    if (key === 'on') for (const [event, handler] of Object.entries(value)) element.addEventListener(event, handler);
    else if (key === 'text') element.textContent = value;
    else if (key === 'value') element.value = value;
    else if (key === 'checked' || key === 'disabled' || key === 'hidden' || key === 'selected') element[key] = !!value;
    else if (key === 'dataset') Object.assign(element.dataset, value);
    // Added to the spec's classes, not in their place.
    else if (key === 'class') { if (value) element.classList.add(...String(value).split(/\s+/).filter(Boolean)); }
    else if (value !== undefined && value !== null && value !== false) element.setAttribute(key, value === true ? '' : value);
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
}

let fieldCount = 0;
/** A labelled control: label text above the input. */
export function field(label, input, extra) {
  if (!input.id) input.id = `f${++fieldCount}`;
  return h('div.field', { class: extra }, h('label', { for: input.id, text: label }), input);
}

/** A checkbox with its label. */
export function checkbox(label, props = {}) {
  const input = h('input', { type: 'checkbox', ...props });
  if (!input.id) input.id = `f${++fieldCount}`;
  return { input, element: h('label.inline', { for: input.id }, input, label) };
}

/** Replaces `container`'s content. */
export function show(container, ...children) {
  container.replaceChildren();
  append(container, children);
}

/** An error box showing the server's answer as returned. */
export function errorBox(error) {
  if (error instanceof CouchError) {
    return h('div.error', { role: 'alert' }, 'The server answered ', h('code', { text: error.shown }));
  }
  return h('div.error', { role: 'alert', text: String(error && error.message || error) });
}

/** Shows `error` in `slot` (or clears it with null). */
export function report(slot, error) {
  show(slot, error ? errorBox(error) : null);
}

let noticeTimer;
export function notify(text) {
  const box = document.getElementById('notice');
  box.textContent = text;
  box.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { box.hidden = true; }, 4000);
}

/** A modal confirmation; resolves true when confirmed. With `typed`, the user must type it. */
export function confirmDialog({ title, message, confirmLabel, typed }) {
  return new Promise((resolve) => {
    const input = typed ? h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false' }) : null;
    const ok = h('button.danger', { type: 'submit', text: confirmLabel, disabled: !!typed });
    const cancel = h('button', { type: 'button', text: 'Cancel' });
    const dialog = h('dialog', { 'aria-labelledby': 'dialog-title' },
      h('form', { method: 'dialog' },
        h('h2#dialog-title', { text: title }),
        h('p', { text: message }),
        input ? field(`Type ${typed} to confirm`, input) : null,
        h('div.row', ok, cancel)));
    if (input) input.addEventListener('input', () => { ok.disabled = input.value !== typed; });
    cancel.addEventListener('click', () => dialog.close('cancel'));
    ok.addEventListener('click', () => { dialog.returnValue = 'ok'; });
    dialog.addEventListener('close', () => { dialog.remove(); resolve(dialog.returnValue === 'ok'); });
    document.body.append(dialog);
    dialog.showModal();
    (input || ok).focus();
  });
}

export function formatBytes(bytes) {
  if (typeof bytes !== 'number') return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

/** The number before a CouchDB 3 sequence's dash ("12-g2wA..." → "12"). */
export function seqNumber(seq) {
  if (seq === undefined || seq === null) return '–';
  return String(seq).split('-')[0];
}

/** Comma-separated text ⇄ list. */
export const splitList = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);

/** A pager: "Previous", "Next" and where we are. */
export function pager({ skip, size, shown, total, onPage, label }) {
  const previous = h('button', { type: 'button', text: 'Previous', disabled: skip === 0, on: { click: () => onPage(Math.max(0, skip - size)) } });
  const hasMore = total !== undefined ? skip + shown < total : shown >= size;
  const next = h('button', { type: 'button', text: 'Next', disabled: !hasMore, on: { click: () => onPage(skip + size) } });
  const where = shown ? `${skip + 1}–${skip + shown}${total !== undefined ? ` of ${total}` : ''}` : 'none';
  return h('nav.pager', { 'aria-label': label || 'Pages' }, previous, next, h('span.muted', { text: where }));
}

/** Links inside the page: `#/db/NAME/...`, each part encoded. */
export const link = (...parts) => `#/${parts.map((part) => encodeURIComponent(part)).join('/')}`;
