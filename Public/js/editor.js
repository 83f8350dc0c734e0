// Code editors for JSON and JavaScript: CodeMirror 5 (Debian's libjs-codemirror, which the
// server serves under vendor/codemirror/) with highlighting, bracket matching and validation as
// you type; a plain text area when it is not installed. Either way the text area holds the text,
// so forms read `editor.value` alike. Tab leaves the editor (no keyboard trap): indent with
// Ctrl-] and Ctrl-[.
import { h } from './ui.js';

const vendor = 'vendor/codemirror/';
let loading = null;

function script(path) {
  return new Promise((resolve, reject) => {
    const element = h('script', { src: vendor + path });
    element.addEventListener('load', resolve);
    element.addEventListener('error', reject);
    document.head.append(element);
  });
}

/** CodeMirror, once its files have loaded; null when the server has none. */
export function loadCodeMirror() {
  if (!loading) {
    loading = (async () => {
      try {
        await script('lib/codemirror.js');
        // Before the page's own style sheet, so the page's rules win.
        document.head.prepend(h('link', { rel: 'stylesheet', href: `${vendor}lib/codemirror.css` }));
        await Promise.all([script('mode/javascript/javascript.js'), script('addon/edit/matchbrackets.js')]);
        return window.CodeMirror || null;
      } catch {
        return null;
      }
    })();
  }
  return loading;
}

/** The line and column (0-based) of `offset` in `text`. */
function position(text, offset) {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split('\n');
  return { line: lines.length - 1, ch: lines[lines.length - 1].length };
}

/** JSON's first error: {message, line, ch}, or null. */
export function checkJSON(text) {
  if (!text.trim()) return { message: 'Empty: a JSON value is needed', line: 0, ch: 0 };
  try {
    JSON.parse(text);
    return null;
  } catch (error) {
    const at = /position (\d+)/.exec(error.message);
    return { message: error.message, ...position(text, at ? Number(at[1]) : text.length) };
  }
}

const opening = { ')': '(', ']': '[', '}': '{' };
// After these a `/` starts a regular expression rather than dividing.
const beforeRegex = /(^|[(,=:[!&|?{};+\-*%<>~^]|\breturn|\btypeof|\bcase|\bdo|\belse|\bin|\bof|\bnew|\bdelete|\bvoid|\bthrow)\s*$/;

/** A JavaScript function's first structural error (unbalanced brackets, unterminated strings,
 *  comments or regular expressions, or text that is not a function expression): {message, line,
 *  ch}, or null. The page may not evaluate code (its Content-Security-Policy forbids it), so the
 *  full compilation is the server's, reported as `compilation_error` on saving. */
export function checkFunction(text) {
  const stack = [];
  let i = 0;
  const fail = (message, at) => ({ message, ...position(text, at) });
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') { const end = text.indexOf('\n', i); i = end < 0 ? text.length : end; continue; }
    if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2);
      if (end < 0) return fail('Unterminated comment', i);
      i = end + 2; continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < text.length && text[j] !== c) {
        if (text[j] === '\\') j += 1;
        else if (text[j] === '\n' && c !== '`') return fail('Unterminated string', i);
        j += 1;
      }
      if (j >= text.length) return fail('Unterminated string', i);
      i = j + 1; continue;
    }
    if (c === '/' && beforeRegex.test(text.slice(Math.max(0, i - 12), i))) {
      let j = i + 1;
      let inClass = false;
      while (j < text.length && (text[j] !== '/' || inClass)) {
        if (text[j] === '\\') j += 1;
        else if (text[j] === '[') inClass = true;
        else if (text[j] === ']') inClass = false;
        else if (text[j] === '\n') return fail('Unterminated regular expression', i);
        j += 1;
      }
      if (j >= text.length) return fail('Unterminated regular expression', i);
      i = j + 1; continue;
    }
    if (c === '(' || c === '[' || c === '{') stack.push({ c, i });
    else if (c in opening) {
      const top = stack.pop();
      if (!top) return fail(`Unexpected '${c}': nothing to close`, i);
      if (top.c !== opening[c]) return fail(`Unexpected '${c}': '${top.c}' opened on line ${position(text, top.i).line + 1} is not closed`, i);
    }
    i += 1;
  }
  if (stack.length) { const top = stack[stack.length - 1]; return fail(`'${top.c}' is never closed`, top.i); }
  const code = text.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, ' ').trim();
  if (!code) return fail('Empty: a function is needed', 0);
  if (!/^(async\s+)?(function\b|\(|[A-Za-z_$][\w$]*\s*=>)/.test(code)) {
    return fail('Not a function: the text must evaluate to one, as in function (doc) { … }', text.indexOf(code[0]));
  }
  return null;
}

let count = 0;

/**
 * A labelled code editor. `mode`: 'json' or 'javascript'; `check`: text → error or null
 * (default: JSON's or a function's). Returns {element, value, check(), markError(), focus()}.
 */
export function codeEditor({ id, label, mode = 'json', value = '', rows = 10, check } = {}) {
  const validate = check || (mode === 'json' ? checkJSON : checkFunction);
  const textarea = h('textarea.code-text', { id: id || `code${++count}`, rows, spellcheck: 'false', value, autocomplete: 'off' });
  const message = h('div.code-message', { id: `${textarea.id}-message`, 'aria-live': 'polite' });
  textarea.setAttribute('aria-describedby', message.id);
  const labelElement = h('label', { for: textarea.id, text: label });
  const element = h('div.field.code', { dataset: { editor: 'loading', mode } }, labelElement, textarea, message);
  let cm = null;
  let marked = null;
  let timer = null;

  function show(error, fromServer) {
    if (cm && marked !== null) { cm.removeLineClass(marked, 'background', 'code-error-line'); marked = null; }
    message.textContent = error ? `${fromServer ? '' : `Line ${error.line + 1}: `}${error.message}` : '';
    message.classList.toggle('bad', !!error);
    element.dataset.valid = error ? 'no' : 'yes';
    if (cm && error && error.line !== undefined && error.line < cm.lineCount()) {
      marked = error.line;
      cm.addLineClass(marked, 'background', 'code-error-line');
    }
  }
  function changed() {
    clearTimeout(timer);
    timer = setTimeout(() => show(validate(textarea.value)), 150);
  }
  textarea.addEventListener('input', changed);

  const editor = {
    element,
    get value() { return cm ? cm.getValue() : textarea.value; },
    set value(text) { if (cm) cm.setValue(text); else textarea.value = text; show(validate(text)); },
    /** The current error (shown), or null. */
    check() { const error = validate(editor.value); show(error); return error; },
    /** Shows an error found elsewhere (the server's answer), on `line` when known. */
    markError(text, line) { show(text ? { message: text, line } : null, true); },
    focus() { if (cm) cm.focus(); else textarea.focus(); },
  };
  show(validate(value));

  loadCodeMirror().then(async (CodeMirror) => {
    if (!CodeMirror) { element.dataset.editor = 'plain'; return; }
    // Screens build their editors before showing them: wait (a while) until this one is shown.
    for (let frames = 0; !element.isConnected; frames += 1) {
      if (frames > 600) return;
      await new Promise((resolve) => requestAnimationFrame(resolve));
    }
    const hadFocus = document.activeElement === textarea;
    cm = CodeMirror.fromTextArea(textarea, {
      mode: mode === 'json' ? { name: 'javascript', json: true } : 'javascript',
      lineNumbers: true, matchBrackets: true, indentUnit: 2, tabSize: 2, viewportMargin: Infinity,
      screenReaderLabel: label, extraKeys: { Tab: false, 'Shift-Tab': false },
    });
    cm.on('change', () => { cm.save(); changed(); });
    labelElement.addEventListener('click', (event) => { event.preventDefault(); cm.focus(); });
    // An editor drawn while hidden (a closed <details>) measures itself again once seen.
    new IntersectionObserver((entries) => { if (entries.some((entry) => entry.isIntersecting)) cm.refresh(); })
      .observe(cm.getWrapperElement());
    element.dataset.editor = 'codemirror';
    if (hadFocus) cm.focus();
    show(validate(textarea.value));
  });
  return editor;
}
