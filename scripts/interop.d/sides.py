"""The two servers as scenarios drive them: databases, replications run by either server's
replicator (one-shot, continuous, or a `_replicator` document), their progress and their
checkpoints. Both speak CouchDB's API; what differs is only who runs the replication."""

import time

from client import quote, query
import compare as comparing


class ScenarioFailure(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise ScenarioFailure(message)


def sequence_number(seq):
    """The leading number of a sequence (an integer, `"N-..."`, or None)."""
    if seq is None:
        return 0
    if isinstance(seq, int):
        return seq
    head = str(seq).split("-", 1)[0]
    return int(head) if head.isdigit() else 0


class Side:
    def __init__(self, name, peer, is_couchette, credentials=None):
        self.name = name
        self.peer = peer
        self.is_couchette = is_couchette
        self.client = peer.client
        base = peer.url
        if credentials:
            base = base.replace("http://", f"http://{credentials[0]}:{credentials[1]}@")
        self.base = base

    def url(self, db):
        return f"{self.base}/{quote(db)}"

    def create(self, db, partitioned=False, revs_limit=None):
        self.client.request("DELETE", f"/{quote(db)}", expect=None)
        self.client.put(f"/{quote(db)}" + (query(partitioned=True) if partitioned else ""))
        if revs_limit:
            self.client.put(f"/{quote(db)}/_revs_limit", revs_limit)

    def endpoint(self, side, db):
        """How this server's replicator names `db` on `side`: Couchette names its own
        databases (the store, no HTTP), CouchDB 3 only takes URLs."""
        return db if side is self and self.is_couchette else side.url(db)

    # -- one-shot, continuous, persistent

    def replicate(self, source, source_db, target, target_db, **options):
        """A one-shot `POST /_replicate` run by this server; its last session's statistics."""
        body = {"source": self.endpoint(source, source_db), "target": self.endpoint(target, target_db), **options}
        answer = self.client.post("/_replicate", body)
        check(answer.get("ok") is True, f"{self.name} replication answered {answer}")
        history = (answer.get("history") or [{}])[0]
        check(history.get("doc_write_failures", 0) == 0, f"{self.name} replication: {history.get('doc_write_failures')} write failures")
        return history

    def start_continuous(self, source, source_db, target, target_db, **options):
        body = {"source": self.endpoint(source, source_db), "target": self.endpoint(target, target_db),
                "continuous": True, **options}
        return self.client.post("/_replicate", body)["_local_id"]

    def cancel(self, replication_id):
        self.client.request("POST", "/_replicate", {"replication_id": replication_id, "cancel": True}, expect=None)

    def job(self, replication_id):
        for job in self.client.get("/_scheduler/jobs")["jobs"]:
            if job["id"] == replication_id:
                return job
        return None

    def put_replication(self, doc_id, source, source_db, target, target_db, **options):
        body = {"source": self.endpoint(source, source_db), "target": self.endpoint(target, target_db), **options}
        self.delete_replication(doc_id)
        self.client.put(f"/_replicator/{quote(doc_id)}", body)

    def replication_state(self, doc_id):
        status, state = self.client.request("GET", f"/_scheduler/docs/_replicator/{quote(doc_id)}", expect=None)
        return state if status == 200 else None

    def wait_replication(self, doc_id, states=("completed",), timeout=600, no_errors=False):
        """Waits for a `_replicator` document's job to reach one of `states`; returns its
        scheduler entry and the states seen on the way. `no_errors`: a job that crashes
        (and would restart) fails at once."""
        seen = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.replication_state(doc_id)
            if state and (not seen or seen[-1] != state.get("state")):
                seen.append(state.get("state"))
            if no_errors and state and (state.get("error_count") or state.get("state") in ("crashing", "error")):
                raise ScenarioFailure(f"{self.name} job {doc_id} crashed (states {seen}): {state.get('info')}")
            if state and state.get("state") in states:
                return state, seen
            if state and state.get("state") == "failed":
                raise ScenarioFailure(f"{self.name} job {doc_id} failed: {state.get('info')}")
            time.sleep(0.25)
        raise ScenarioFailure(f"{self.name} job {doc_id} not {states} within {timeout} s (states {seen})")

    def delete_replication(self, doc_id):
        status, doc = self.client.request("GET", f"/_replicator/{quote(doc_id)}", expect=None)
        if status == 200:
            self.client.request("DELETE", f"/_replicator/{quote(doc_id)}" + query(rev=doc["_rev"]), expect=None)

    # -- reading

    def checkpoint(self, db):
        """The replication checkpoint (`_local` document with a history) in `db`, or None."""
        rows = self.client.get(f"/{quote(db)}/_local_docs" + query(include_docs=True))["rows"]
        for row in rows:
            if row.get("doc") and "history" in row["doc"]:
                return row["doc"]
        return None

    def update_seq(self, db):
        return self.client.get(f"/{quote(db)}")["update_seq"]


def wait_caught_up(source, source_db, target, target_db, timeout=600, ids=None):
    """Until the target holds every leaf of the source (`_revs_diff` finds none missing)."""
    deadline = time.monotonic() + timeout
    while True:
        leaves = comparing.leaves(source.client, source_db)
        if ids is not None:
            leaves = {k: v for k, v in leaves.items() if k in ids}
        missing = {}
        items = list(leaves.items())
        for start in range(0, len(items), 500):
            missing.update(target.client.post(f"/{quote(target_db)}/_revs_diff", dict(items[start:start + 500])))
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ScenarioFailure(f"{target.name} {target_db} still lacks {len(missing)} documents after {timeout} s")
        time.sleep(0.3)


def expect_same(first, first_db, second, second_db, settle=10, **options):
    """The two databases agree. A cluster's `_changes` and reads may lag a write to one of its
    copies for a moment: differences are looked at again for up to `settle` seconds."""
    deadline = time.monotonic() + settle
    while True:
        outcome = comparing.compare(first.client, first_db, second.client, second_db, **options)
        if outcome.equal or time.monotonic() > deadline:
            break
        time.sleep(1)
    check(outcome.equal, f"{first.name} {first_db} vs {second.name} {second_db}: " + "; ".join(outcome.differences))
    return outcome
