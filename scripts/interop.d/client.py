"""A small HTTP client for CouchDB's API (both servers speak it): one kept-alive connection,
Basic authentication, JSON in and out, and raw bytes where attachments are concerned."""

import base64
import http.client
import json
import urllib.parse


class HTTPError(Exception):
    def __init__(self, method, path, status, body):
        super().__init__(f"{method} {path} answered {status}: {body[:300]!r}")
        self.status = status
        self.body = body


class Client:
    def __init__(self, url, credentials=None, timeout=300):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port
        self.timeout = timeout
        self.headers = {}
        if credentials:
            token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()
            self.headers["Authorization"] = "Basic " + token
        self.connection = None

    def raw(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); retried once on a connection the server closed."""
        all_headers = dict(self.headers, **(headers or {}))
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.connection.request(method, path, body=body, headers=all_headers)
                response = self.connection.getresponse()
                data = response.read()
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return response.status, response, data
            except (http.client.HTTPException, ConnectionError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise

    def close(self):
        if self.connection:
            self.connection.close()
        self.connection = None

    def request(self, method, path, body=None, headers=None, expect=(200, 201, 202)):
        """(status, parsed JSON); raises HTTPError unless the status is expected (None: any)."""
        headers = dict(headers or {})
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            headers.setdefault("Content-Type", "application/json")
        headers.setdefault("Accept", "application/json")
        status, _, data = self.raw(method, path, body, headers)
        if expect is not None and status not in expect:
            raise HTTPError(method, path, status, data)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, data

    def get(self, path, **kw):
        return self.request("GET", path, **kw)[1]

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)[1]

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)[1]

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)[1]


def quote(value):
    """A document ID or attachment name in a path (`/` kept for `_design/` and `_local/`)."""
    for prefix in ("_design/", "_local/"):
        if value.startswith(prefix):
            return prefix + urllib.parse.quote(value[len(prefix):], safe="")
    return urllib.parse.quote(value, safe="")


def query(**params):
    """`?a=1&b=...` with JSON-encoded values where CouchDB expects JSON."""
    parts = []
    for key, value in params.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, str):
            value = json.dumps(value)
        parts.append(f"{key}={urllib.parse.quote(value, safe='')}")
    return "?" + "&".join(parts) if parts else ""
