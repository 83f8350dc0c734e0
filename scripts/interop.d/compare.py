"""Compares a database on two servers document by document: every leaf revision (deleted
ones included) with its history (`_revisions`), body, and attachments (metadata, digest,
encoding, bytes), each document's winner and `_conflicts`/`_deleted_conflicts`, and the
document counts. Both servers are read through CouchDB's API only, the same way."""

import base64

from client import quote, query

BATCH = 100


def leaves(client, db):
    """{id: sorted leaf revisions}, deleted documents and deleted leaves included."""
    result = {}
    feed = client.get(f"/{quote(db)}/_changes" + query(style="all_docs"))
    for row in feed["results"]:
        result[row["id"]] = sorted(change["rev"] for change in row["changes"])
    return result


def revisions(client, db, pairs):
    """{(id, rev): document as `_bulk_get` gives it with revs, attachments and encodings}."""
    found = {}
    for start in range(0, len(pairs), BATCH):
        batch = pairs[start:start + BATCH]
        answer = client.post(f"/{quote(db)}/_bulk_get" + query(revs=True, attachments=True, att_encoding_info=True),
                             {"docs": [{"id": doc_id, "rev": rev} for doc_id, rev in batch]})
        for result in answer["results"]:
            for entry in result["docs"]:
                if "ok" in entry:
                    doc = entry["ok"]
                    found[(doc["_id"], doc["_rev"])] = doc
    return found


def winners(client, db, ids):
    """{id: (winning rev, sorted _conflicts, sorted _deleted_conflicts)} of live documents."""
    result = {}
    for start in range(0, len(ids), BATCH):
        rows = client.post(f"/{quote(db)}/_all_docs" + query(include_docs=True, conflicts=True, deleted_conflicts=True),
                           {"keys": ids[start:start + BATCH]})["rows"]
        for row in rows:
            if "value" in row and not row["value"].get("deleted") and row.get("doc"):
                doc = row["doc"]
                result[row["id"]] = (row["value"]["rev"], sorted(doc.get("_conflicts", [])),
                                     sorted(doc.get("_deleted_conflicts", [])))
    return result


class Comparison:
    """The outcome: differences found (empty when the databases agree) and what was compared."""

    def __init__(self):
        self.differences = []
        self.documents = 0
        self.leaves = 0
        self.attachments = 0
        self.attachment_bytes = 0

    @property
    def equal(self):
        return not self.differences

    def note(self, text):
        if len(self.differences) < 20:
            self.differences.append(text)
        elif len(self.differences) == 20:
            self.differences.append("... more differences")

    def summary(self):
        return (f"{self.documents} docs, {self.leaves} leaves, {self.attachments} attachments "
                f"({self.attachment_bytes / 1e6:.1f} MB) identical" if self.equal
                else "; ".join(self.differences[:5]))


def compare(a, a_db, b, b_db, ids=None, design=True):
    """Compares `a_db` on server `a` with `b_db` on `b` (clients); only `ids` when given,
    `_design/` documents too unless `design` is false."""
    outcome = Comparison()
    a_leaves, b_leaves = leaves(a, a_db), leaves(b, b_db)
    if ids is not None:
        wanted = set(ids)
        a_leaves = {k: v for k, v in a_leaves.items() if k in wanted}
        b_leaves = {k: v for k, v in b_leaves.items() if k in wanted}
        for missing in sorted(wanted - set(a_leaves) - set(b_leaves)):
            outcome.note(f"{missing}: on neither side")
    if not design:
        a_leaves = {k: v for k, v in a_leaves.items() if not k.startswith("_design/")}
        b_leaves = {k: v for k, v in b_leaves.items() if not k.startswith("_design/")}
    for doc_id in sorted(set(a_leaves) ^ set(b_leaves)):
        outcome.note(f"{doc_id}: only on {'the first' if doc_id in a_leaves else 'the second'} side")
    common = sorted(set(a_leaves) & set(b_leaves))
    for doc_id in common:
        if a_leaves[doc_id] != b_leaves[doc_id]:
            outcome.note(f"{doc_id}: leaves {a_leaves[doc_id]} != {b_leaves[doc_id]}")
    pairs = [(doc_id, rev) for doc_id in common for rev in a_leaves[doc_id] if rev in b_leaves[doc_id]]
    a_docs, b_docs = revisions(a, a_db, pairs), revisions(b, b_db, pairs)
    outcome.documents, outcome.leaves = len(common), len(pairs)
    for pair in pairs:
        left, right = a_docs.get(pair), b_docs.get(pair)
        if left is None or right is None:
            outcome.note(f"{pair[0]} {pair[1]}: not readable on {'the first' if left is None else 'the second'} side")
            continue
        compare_revision(pair, left, right, outcome)
    a_winners, b_winners = winners(a, a_db, common), winners(b, b_db, common)
    for doc_id in common:
        if a_winners.get(doc_id) != b_winners.get(doc_id):
            outcome.note(f"{doc_id}: winner/conflicts {a_winners.get(doc_id)} != {b_winners.get(doc_id)}")
    if ids is None and design:
        a_info, b_info = a.get(f"/{quote(a_db)}"), b.get(f"/{quote(b_db)}")
        for key in ("doc_count", "doc_del_count"):
            if a_info[key] != b_info[key]:
                outcome.note(f"{key} {a_info[key]} != {b_info[key]}")
    return outcome


def compare_revision(pair, left, right, outcome):
    left, right = dict(left), dict(right)
    left_atts, right_atts = left.pop("_attachments", {}), right.pop("_attachments", {})
    if left != right:
        keys = sorted(k for k in set(left) | set(right) if left.get(k) != right.get(k))
        outcome.note(f"{pair[0]} {pair[1]}: body differs in {keys}")
    if sorted(left_atts) != sorted(right_atts):
        outcome.note(f"{pair[0]} {pair[1]}: attachments {sorted(left_atts)} != {sorted(right_atts)}")
    for name in sorted(set(left_atts) & set(right_atts)):
        one, other = left_atts[name], right_atts[name]
        for key in sorted(set(one) | set(other)):
            if one.get(key) != other.get(key):
                shown = (lambda v: f"{len(v)} base64 chars") if key == "data" else repr
                outcome.note(f"{pair[0]} {pair[1]} {name}: {key} {shown(one.get(key, ''))} != {shown(other.get(key, ''))}")
        outcome.attachments += 1
        outcome.attachment_bytes += len(base64.b64decode(one["data"])) if "data" in one else one.get("length", 0)
