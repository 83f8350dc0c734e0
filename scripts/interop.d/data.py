"""The documents scenarios write, through CouchDB's API, to either server: the same edits
give the same bytes on both (bodies from fixed seeds, never the clock)."""

import base64
import json
import random
import sys
import time

from client import HTTPError, quote, query

# Attachment types CouchDB compresses by default, then some it stores as sent.
COMPRESSIBLE = ["text/plain", "text/html; charset=utf-8", "application/json", "application/javascript",
                "application/xml", "Text/CSV"]
STORED_AS_SENT = ["application/octet-stream", "image/png", "application/pdf"]
LARGE = 5 * 1024 * 1024 + 123


def text_bytes(size, seed):
    """Compressible text: words from a small vocabulary."""
    rng = random.Random(seed)
    words = ["couch", "relax", "replicate", "revision", "attachment", "leaf", "branch", "digest", "seq", "node"]
    out = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(words) for _ in range(12)) + f" {rng.randrange(10**6)}\n"
        out.append(line)
        total += len(line)
    return "".join(out).encode()[:size]


def random_bytes(size, seed):
    return random.Random(seed).randbytes(size)


def body_for(content_type, size, seed):
    return random_bytes(size, seed) if content_type in STORED_AS_SENT else text_bytes(size, seed)


def inline(content_type, data):
    return {"content_type": content_type, "data": base64.b64encode(data).decode()}


def put(client, db, doc_id, body, **params):
    """A document written; a cluster that answers 412 `missing_stub` for a revision it acked a
    moment ago (one of its copies lags) is asked again, the same edit giving the same revision."""
    path = f"/{quote(db)}/{quote(doc_id)}" + query(**params)
    for attempt in range(4):
        status, answer = client.request("PUT", path, body, expect=None)
        if status in (200, 201, 202):
            return answer["rev"]
        if status != 412 or attempt == 3:
            raise HTTPError("PUT", path, status, repr(answer).encode())
        print(f"interop: PUT {path} answered 412 {answer.get('reason')}; asked again", file=sys.stderr)
        time.sleep(0.5)


def put_attachment(client, db, doc_id, name, rev, content_type, data):
    path = f"/{quote(db)}/{quote(doc_id)}/{quote(name)}" + (query(rev=rev) if rev else "")
    return client.request("PUT", path, data, headers={"Content-Type": content_type})[1]["rev"]


def delete_attachment(client, db, doc_id, name, rev):
    return client.delete(f"/{quote(db)}/{quote(doc_id)}/{quote(name)}" + query(rev=rev))["rev"]


def put_multipart(client, db, doc_id, body, attachments, rev=None):
    """`PUT` as `multipart/related`: the JSON, then one part per attachment (`follows`)."""
    boundary = "interop-boundary-0123456789"
    doc = dict(body)
    if rev:
        doc["_rev"] = rev
    doc["_attachments"] = {name: {"follows": True, "content_type": ctype, "length": len(data)}
                           for name, ctype, data in attachments}
    parts = [f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode() + json.dumps(doc).encode()]
    for name, _, data in attachments:
        parts.append(f"--{boundary}\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\r\n".encode() + data)
    payload = b"\r\n".join(parts) + f"\r\n--{boundary}--".encode()
    return client.request("PUT", f"/{quote(db)}/{quote(doc_id)}", payload,
                          headers={"Content-Type": f'multipart/related; boundary="{boundary}"'})[1]["rev"]


def bulk(client, db, docs, new_edits=True):
    answer = client.post(f"/{quote(db)}/_bulk_docs", {"docs": docs, "new_edits": new_edits})
    failed = [row for row in answer if "error" in row]
    if failed:
        raise AssertionError(f"_bulk_docs on {db} refused {len(failed)}: {failed[:3]}")
    return answer


def plain_documents(client, db, count, prefix="doc", start=0, batch=1000, size=64):
    """`count` small documents `prefix-000000`..., in batches."""
    for first in range(start, start + count, batch):
        docs = [{"_id": f"{prefix}-{i:06d}", "n": i, "tags": ["interop", str(i % 7)], "pad": "x" * (size + i % 13)}
                for i in range(first, min(start + count, first + batch))]
        bulk(client, db, docs)


def documents_with_attachments(client, db, count, prefix="att", start=0, batch=100):
    """`count` documents with one small attachment each, half compressible, in batches."""
    for first in range(start, start + count, batch):
        docs = []
        for i in range(first, min(start + count, first + batch)):
            ctype = "text/plain" if i % 2 == 0 else "application/octet-stream"
            docs.append({"_id": f"{prefix}-{i:06d}", "n": i,
                         "_attachments": {f"file-{i}.dat": inline(ctype, body_for(ctype, 200 + i % 300, i))}})
        bulk(client, db, docs)


def rich(client, db, large=True):
    """Documents that exercise what replication must carry: attachments of every kind added,
    replaced and deleted across revisions (the target then asks with `atts_since`), large
    ones (compressible and not), conflicts with attachments on their branches, deleted
    documents and deleted leaves, a design document, odd IDs."""
    plain_documents(client, db, 40, prefix="plain")
    # One attachment of each type, uploaded inline.
    put(client, db, "types", {"kind": "one of each", "_attachments": {
        f"file-{i}": inline(ctype, body_for(ctype, 3000 + 7 * i, 100 + i))
        for i, ctype in enumerate(COMPRESSIBLE + STORED_AS_SENT)}})
    # A history: added, added, replaced, deleted, added again.
    rev = put(client, db, "history", {"step": 1, "_attachments": {
        "a.txt": inline("text/plain", text_bytes(4000, 1)), "b.bin": inline("application/octet-stream", random_bytes(4000, 2))}})
    rev = put(client, db, "history", {"_rev": rev, "step": 2, "_attachments": {
        "a.txt": {"stub": True}, "b.bin": {"stub": True}, "c.json": inline("application/json", b'{"c": [1, 2, 3]}' * 50)}})
    rev = put_attachment(client, db, "history", "a.txt", rev, "text/plain", text_bytes(5000, 3))
    rev = delete_attachment(client, db, "history", "b.bin", rev)
    rev = put_multipart(client, db, "history", {"step": 5}, [("d.xml", "application/xml", b"<a>" + text_bytes(3000, 4) + b"</a>")],
                        rev=rev)
    # A multipart upload of several parts.
    put_multipart(client, db, "multipart", {"via": "multipart/related"}, [
        ("code.js", "application/javascript", b"function f(x) { return x + 1; }\n" * 100),
        ("photo.png", "image/png", random_bytes(20_000, 5)),
        ("notes.txt", "text/plain; charset=utf-8", "ünïcødé text\n".encode() * 300)])
    if large:
        rev = put_attachment(client, db, "large", "large.txt", None, "text/plain", text_bytes(LARGE, 6))
        put_attachment(client, db, "large", "large.bin", rev, "application/octet-stream", random_bytes(LARGE, 7))
    # Conflicts: two branches after a common first revision, attachments on both.
    bulk(client, db, [
        {"_id": "conflicted", "_rev": "1-" + "a" * 32, "v": 0},
        {"_id": "conflicted", "_rev": "2-" + "b" * 32, "_revisions": {"start": 2, "ids": ["b" * 32, "a" * 32]}, "v": "b",
         "_attachments": {"b.txt": inline("text/plain", text_bytes(2000, 8))}},
        {"_id": "conflicted", "_rev": "3-" + "c" * 32, "_revisions": {"start": 3, "ids": ["c" * 32, "d" * 32, "a" * 32]},
         "v": "c", "_attachments": {"c.bin": inline("application/octet-stream", random_bytes(2000, 9))}},
        # A deleted leaf beside a live one.
        {"_id": "deleted-leaf", "_rev": "1-" + "e" * 32, "v": 1},
        {"_id": "deleted-leaf", "_rev": "2-" + "f" * 32, "_revisions": {"start": 2, "ids": ["f" * 32, "e" * 32]},
         "_deleted": True},
        {"_id": "deleted-leaf", "_rev": "2-" + "0" * 32, "_revisions": {"start": 2, "ids": ["0" * 32, "e" * 32]}, "v": 2},
    ], new_edits=False)
    # Deletions, one keeping a body.
    for i in range(5):
        rev = put(client, db, f"gone-{i}", {"i": i})
        client.delete(f"/{quote(db)}/gone-{i}" + query(rev=rev))
    rev = put(client, db, "gone-with-body", {"x": 1})
    put(client, db, "gone-with-body", {"_rev": rev, "_deleted": True, "reason": "kept in the tombstone"})
    # IDs that need escaping, and a design document.
    put(client, db, "odd id/with+signs?&é", {"odd": True})
    # Revisions a replicated document may carry (CouchDB keeps any digest that is not 32 hex
    # digits): quotes and a backslash, on two branches; an attachment named with a quote.
    bulk(client, db, [{"_id": "odd-revisions", "_rev": '1-a"b\\c', "v": 1},
                      {"_id": "odd-revisions", "_rev": '1-a"a', "v": 2}], new_edits=False)
    put(client, db, "odd-attachment", {"_attachments": {'we"ird ☃.txt': inline("text/plain", text_bytes(3000, 10))}})
    put(client, db, "_design/interop", {"language": "javascript", "views": {"by_n": {"map": "function(d){ if (d.n) emit(d.n); }"}}})


def more_edits(client, db, round_number):
    """A second round on a `rich` database: new revisions that keep, replace and add
    attachments (the target has the older ones: `atts_since`), new documents, a deletion."""
    doc = client.get(f"/{quote(db)}/history")
    rev = put(client, db, "history", {**{k: v for k, v in doc.items() if k not in ("_attachments",)}, "round": round_number,
                                      "_attachments": {**{n: {"stub": True} for n in doc["_attachments"]},
                                                       f"round-{round_number}.txt": inline("text/plain", text_bytes(1500, 50 + round_number))}})
    put_attachment(client, db, "history", "a.txt", rev, "text/plain", text_bytes(6000, 60 + round_number))
    plain_documents(client, db, 10, prefix=f"round{round_number}")
    gone = f"plain-{round_number:06d}"
    client.delete(f"/{quote(db)}/{gone}" + query(rev=client.get(f"/{quote(db)}/{gone}")["_rev"]))
