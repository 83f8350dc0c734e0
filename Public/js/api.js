// The only module that talks HTTP: always to the server this page came from, through
// CouchDB's public API, so the page works against Couchette and Apache CouchDB alike.

/** An error answer, kept as the server returned it ({error, reason} and the status). */
export class CouchError extends Error {
  constructor(status, body, text) {
    const reason = body && typeof body === 'object' ? `${body.error}: ${body.reason}` : (text || `HTTP ${status}`);
    super(reason);
    this.status = status;
    this.body = body;
    this.text = text;
  }
  /** The answer as it came: status, then the JSON body verbatim. */
  get shown() {
    return `${this.status} ${this.body ? JSON.stringify(this.body) : (this.text || '')}`.trim();
  }
}

export const enc = encodeURIComponent;

/** A document's path: `_design/` and `_local/` IDs keep their slash, as CouchDB expects. */
export function docPath(db, id) {
  for (const prefix of ['_design/', '_local/']) {
    if (id.startsWith(prefix)) return `/${enc(db)}/${prefix}${enc(id.slice(prefix.length))}`;
  }
  return `/${enc(db)}/${enc(id)}`;
}

export function query(params) {
  const parts = [];
  for (const [key, value] of Object.entries(params || {})) {
    if (value === undefined || value === null || value === '') continue;
    parts.push(`${enc(key)}=${enc(typeof value === 'string' ? value : JSON.stringify(value))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** One request; resolves to the parsed JSON, rejects with a CouchError. */
export async function request(method, path, { body, params, headers, raw } = {}) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json', ...(headers || {}) } };
  if (body !== undefined) {
    init.body = raw ? body : JSON.stringify(body);
    if (!raw) init.headers['Content-Type'] = 'application/json';
  }
  const response = await fetch(path + query(params), init);
  const text = await response.text();
  let json;
  try { json = text ? JSON.parse(text) : null; } catch { json = undefined; }
  if (!response.ok) throw new CouchError(response.status, json, text);
  return json;
}

export const get = (path, params) => request('GET', path, { params });
export const put = (path, body, params) => request('PUT', path, { body, params });
export const post = (path, body, params) => request('POST', path, { body, params });
export const del = (path, params) => request('DELETE', path, { params });

/** Uploads `file` as an attachment, reporting progress (0..1); resolves to the JSON answer. */
export function upload(path, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', path);
    xhr.withCredentials = true;
    xhr.setRequestHeader('Content-Type', file.type || 'application/octet-stream');
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.onprogress = (event) => { if (event.lengthComputable) onProgress(event.loaded / event.total); };
    xhr.onload = () => {
      let json;
      try { json = JSON.parse(xhr.responseText); } catch { json = undefined; }
      if (xhr.status >= 200 && xhr.status < 300) { onProgress(1); resolve(json); }
      else reject(new CouchError(xhr.status, json, xhr.responseText));
    };
    xhr.onerror = () => reject(new CouchError(0, null, 'network error'));
    xhr.send(file);
  });
}
