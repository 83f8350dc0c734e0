"""The interop scenarios, one function each. Every scenario gets an `env` (the two `Side`s,
`couchdb` and `couchette`, restart functions, the run's size) and returns its figures; it
raises `ScenarioFailure` when the servers disagree. Each ends by comparing the databases
it replicated document by document (`compare.py`)."""

import time

import data
from client import query
from sides import ScenarioFailure, check, expect_same, sequence_number, wait_caught_up

SCENARIOS = []


def scenario(title, quick=False):
    """Registers a scenario; `quick` ones also run in `scripts/test`'s subset."""
    def register(function):
        function.title = title
        function.quick = quick
        SCENARIOS.append(function)
        return function
    return register


def timed(function, *args, **kwargs):
    start = time.monotonic()
    result = function(*args, **kwargs)
    return result, time.monotonic() - start


def both_runners(env):
    """(runner, source side, target side) for each replicator and direction."""
    cdb, cte = env.couchdb, env.couchette
    return [(cdb, cte, cdb, "CouchDB pulls"), (cdb, cdb, cte, "CouchDB pushes"),
            (cte, cdb, cte, "Couchette pulls"), (cte, cte, cdb, "Couchette pushes")]


def one_shot(env, runner, source, target, name):
    """A `rich` database replicated one-shot, then a second round of edits (kept, replaced and
    new attachments: `atts_since`) replicated again."""
    src, tgt = env.db(name + "-src"), env.db(name + "-tgt")
    source.create(src)
    target.create(tgt)
    data.rich(source.client, src, large=not env.quick)
    first, seconds = timed(runner.replicate, source, src, target, tgt)
    outcome = expect_same(source, src, target, tgt)
    data.more_edits(source.client, src, 1)
    second = runner.replicate(source, src, target, tgt)
    outcome = expect_same(source, src, target, tgt)
    return (f"{first.get('docs_written', 0)}+{second.get('docs_written', 0)} docs written in {seconds:.1f} s "
            f"(first run); {outcome.summary()}")


@scenario("CouchDB pulls from Couchette (one-shot): attachments small and large, compressible or not, "
          "added, replaced and deleted across revisions; conflicts; deletions", quick=True)
def couchdb_pulls_one_shot(env):
    return one_shot(env, env.couchdb, env.couchette, env.couchdb, "couchdb-pull")


@scenario("CouchDB pushes to Couchette (one-shot), same documents")
def couchdb_pushes_one_shot(env):
    return one_shot(env, env.couchdb, env.couchdb, env.couchette, "couchdb-push")


@scenario("Couchette pulls from CouchDB (one-shot), same documents")
def couchette_pulls_one_shot(env):
    return one_shot(env, env.couchette, env.couchdb, env.couchette, "couchette-pull")


@scenario("Couchette pushes to CouchDB (one-shot), same documents")
def couchette_pushes_one_shot(env):
    return one_shot(env, env.couchette, env.couchette, env.couchdb, "couchette-push")


def continuous(env, runner, label):
    """Two continuous jobs run by `runner` at once: a pull and a push of 1,000 documents with
    attachments each, then 100 more on each source while they run."""
    other = env.couchette if runner is env.couchdb else env.couchdb
    count = 1000
    jobs = []
    for direction, source, target in (("pull", other, runner), ("push", runner, other)):
        src, tgt = env.db(f"{label}-{direction}-src"), env.db(f"{label}-{direction}-tgt")
        source.create(src)
        target.create(tgt)
        data.documents_with_attachments(source.client, src, count)
        jobs.append((direction, source, src, target, tgt))
    start = time.monotonic()
    ids = []
    try:
        for job in jobs:
            ids.append((job, runner.start_continuous(*job[1:])))
        for _, source, src, target, tgt in jobs:
            wait_caught_up(source, src, target, tgt)
        caught_up = time.monotonic() - start
        for _, source, src, _, _ in jobs:
            data.documents_with_attachments(source.client, src, 100, start=count)
        for _, source, src, target, tgt in jobs:
            wait_caught_up(source, src, target, tgt)
        figures = []
        for (direction, source, src, target, tgt), replication_id in ids:
            job = runner.job(replication_id)
            check(job is not None, f"{runner.name} has no job {replication_id}")
            info = job.get("info") or {}
            check(info.get("doc_write_failures") == 0, f"{direction}: doc_write_failures {info.get('doc_write_failures')}")
            crashes = [event for event in job.get("history", []) if event.get("type") == "crashed"]
            check(not crashes, f"{direction}: the job crashed: {crashes[:2]}")
            outcome = expect_same(source, src, target, tgt)
            figures.append(f"{direction}: {info.get('docs_written')} written, {info.get('doc_write_failures')} failures, "
                           f"{outcome.documents} docs identical")
    finally:
        for _, replication_id in ids:
            runner.cancel(replication_id)
    return f"{2 * count} docs with attachments caught up in {caught_up:.1f} s; " + "; ".join(figures)


@scenario("CouchDB's replicator, continuous: pulls 1,000 documents with attachments from Couchette "
          "(and pushes 1,000 to it), then 100 more each while running")
def couchdb_continuous(env):
    return continuous(env, env.couchdb, "couchdb-cont")


@scenario("Couchette's replicator, continuous: pulls 1,000 documents with attachments from CouchDB "
          "(and pushes 1,000 to it), then 100 more each while running")
def couchette_continuous(env):
    return continuous(env, env.couchette, "couchette-cont")


def persistent(env, runner, label):
    """Two continuous `_replicator` jobs on `runner` (a pull and a push), through a restart
    of each server with edits before and after: each restarted job resumes from a
    checkpoint that is not the first (its new session starts past 0)."""
    other = env.couchette if runner is env.couchdb else env.couchdb
    jobs = []
    for direction, source, target in (("pull", other, runner), ("push", runner, other)):
        src, tgt = env.db(f"{label}-{direction}-src"), env.db(f"{label}-{direction}-tgt")
        source.create(src)
        target.create(tgt)
        data.rich(source.client, src, large=False)
        data.plain_documents(source.client, src, 300, prefix="bulk")
        jobs.append((f"{label}-{direction}", source, src, target, tgt))
    try:
        for doc_id, source, src, target, tgt in jobs:
            runner.put_replication(doc_id, source, src, target, tgt, continuous=True, checkpoint_interval=500)
        for doc_id, *_ in jobs:
            runner.wait_replication(doc_id, states=("running",), timeout=120)

        before_restarts = {}

        def settle(round_number):
            for _, source, src, target, tgt in jobs:
                wait_caught_up(source, src, target, tgt)
            time.sleep(1.5)  # three checkpoint intervals: the progress is recorded
            for doc_id, source, src, target, tgt in jobs:
                checkpoint = target.checkpoint(tgt)
                check(checkpoint is not None, f"no checkpoint in {target.name} {tgt} (round {round_number})")
                before_restarts.setdefault(doc_id, []).append(checkpoint["_rev"])

        settle(0)
        # More progress, for what a restart resumes from not to be the first checkpoint.
        for _, source, src, *_ in jobs:
            data.plain_documents(source.client, src, 50, prefix="before-restarts")
        settle(0)
        for round_number, restart in ((1, env.restart_couchette), (2, env.restart_couchdb)):
            restart()
            for _, source, src, *_ in jobs:
                data.more_edits(source.client, src, round_number)
            settle(round_number)
        figures = []
        for doc_id, source, src, target, tgt in jobs:
            checkpoint = target.checkpoint(tgt)
            sessions = checkpoint["history"]
            # What the first restart resumed from was not the first checkpoint written.
            check(int(before_restarts[doc_id][1].split("-")[1]) >= 2, f"{doc_id}: checkpoints {before_restarts[doc_id]}")
            resumed = [sequence_number(entry.get("start_last_seq")) for entry in sessions[:-1]]
            check(len(sessions) >= 2, f"{doc_id}: {len(sessions)} session in the checkpoint history; the restarts made none")
            check(all(start > 0 for start in resumed),
                  f"{doc_id}: a session after a restart started from 0: {[e.get('start_last_seq') for e in sessions]}")
            state = runner.replication_state(doc_id)
            check(state["info"].get("doc_write_failures", 0) == 0, f"{doc_id}: {state['info'].get('doc_write_failures')} write failures")
            outcome = expect_same(source, src, target, tgt)
            figures.append(f"{doc_id.rsplit('-', 1)[1]}: checkpoint {before_restarts[doc_id][1]} before the restarts, "
                           f"{len(sessions)} sessions, the later resumed at seq {resumed}, {outcome.documents} docs identical")
    finally:
        for doc_id, *_ in jobs:
            runner.delete_replication(doc_id)
    return "; ".join(figures)


@scenario("CouchDB's _replicator (continuous pull and push) through a restart of Couchette, then of CouchDB: "
          "resumed from a checkpoint that is not the first")
def couchdb_replicator_database(env):
    return persistent(env, env.couchdb, "couchdb-persist")


@scenario("Couchette's _replicator (continuous pull and push) through a restart of Couchette, then of CouchDB: "
          "resumed from a checkpoint that is not the first")
def couchette_replicator_database(env):
    return persistent(env, env.couchette, "couchette-persist")


@scenario("A long push with several checkpoints: CouchDB pushes 10,000 documents to Couchette (2,000 in the quick "
          "run), never restarting; then Couchette pushes them to CouchDB", quick=True)
def long_push(env):
    cdb, cte = env.couchdb, env.couchette
    count = 2000 if env.quick else 10_000
    src, mid, back = env.db("long-src"), env.db("long-mid"), env.db("long-back")
    cdb.create(src)
    cte.create(mid)
    cdb.create(back)
    data.plain_documents(cdb.client, src, count)
    data.documents_with_attachments(cdb.client, src, count // 20)
    figures = []
    # Checkpoints come on a timer: Couchette pushes the quick run's 2,100 documents in under half
    # a second, which 200 ms intervals cut into only two or three checkpoints.
    interval = 50 if env.quick else 200
    for runner, source, s_db, target, t_db in ((cdb, cdb, src, cte, mid), (cte, cte, mid, cdb, back)):
        doc_id = env.db(f"long-{runner.name.lower()}")
        start = time.monotonic()
        runner.put_replication(doc_id, source, s_db, target, t_db, checkpoint_interval=interval, worker_batch_size=100)
        state, seen = runner.wait_replication(doc_id, timeout=900, no_errors=True)
        seconds = time.monotonic() - start
        runner.delete_replication(doc_id)
        info = state.get("info") or {}
        check(state.get("error_count", 0) == 0 and "crashing" not in seen and "error" not in seen,
              f"{runner.name} job restarted: states {seen}, error_count {state.get('error_count')}")
        check(info.get("doc_write_failures") == 0, f"{runner.name}: doc_write_failures {info.get('doc_write_failures')}")
        checkpoint = target.checkpoint(t_db)
        check(checkpoint is not None, f"no checkpoint on {target.name}")
        checkpoints = int(checkpoint["_rev"].split("-")[1])
        check(checkpoints >= 3, f"{runner.name}: only {checkpoints} checkpoints written to {target.name}")
        check(len(checkpoint["history"]) == 1, f"{runner.name}: {len(checkpoint['history'])} sessions (a restart)")
        outcome = expect_same(source, s_db, target, t_db)
        figures.append(f"{runner.name}: {info.get('docs_written')} docs in {seconds:.1f} s "
                       f"({info.get('docs_written', 0) / seconds:.0f}/s), {checkpoints} checkpoints (_local rev "
                       f"{checkpoint['_rev']}), 1 session, 0 failures, identical")
    return "; ".join(figures)


@scenario("The same edits on both servers give the same revision IDs (attachments of every type, "
          "every way of uploading), so replicating them either way creates no conflict", quick=True)
def identical_revisions(env):
    cdb, cte = env.couchdb, env.couchette
    db = env.db("same")
    cdb.create(db)
    cte.create(db)
    steps = []

    def both(label, action):
        revs = [action(side.client) for side in (cdb, cte)]
        check(revs[0] == revs[1], f"{label}: CouchDB {revs[0]}, Couchette {revs[1]}")
        steps.append(label)
        return revs[0]

    attachments = {f"a{i}": data.inline(ctype, data.body_for(ctype, 2000 + 31 * i, 200 + i))
                   for i, ctype in enumerate(data.COMPRESSIBLE + data.STORED_AS_SENT)}
    rev = both("inline attachments of every type", lambda c: data.put(c, db, "doc", {"n": 1, "_attachments": attachments}))
    for i, ctype in enumerate(data.COMPRESSIBLE + data.STORED_AS_SENT):
        rev = both(f"standalone PUT {ctype}", lambda c, r=rev, t=ctype, i=i: data.put_attachment(
            c, db, "doc", f"put-{i}", r, t, data.body_for(t, 5000 + i, 300 + i)))
    if not env.quick:
        rev = both("standalone PUT of 5 MB of text", lambda c, r=rev: data.put_attachment(
            c, db, "doc", "large.txt", r, "text/plain", data.text_bytes(data.LARGE, 9)))
    current = cdb.client.get(f"/{db}/doc")
    stubs = {name: {"stub": True} for name in current["_attachments"]}
    rev = both("stubs kept, one replaced inline", lambda c, r=rev: data.put(c, db, "doc", {
        "_rev": r, "n": 2, "_attachments": {**stubs, "a0": data.inline("text/plain", b"replaced\n" * 100)}}))
    rev = both("attachment deleted", lambda c, r=rev: data.delete_attachment(c, db, "doc", "a1", r))
    both("multipart/related document", lambda c: data.put_multipart(c, db, "mp", {"via": "multipart"}, [
        ("x.json", "application/json", b'{"x": "' + b"y" * 3000 + b'"}'), ("y.png", "image/png", data.random_bytes(3000, 11)),
        ("z.xml", "application/xml", b"<z>" + data.text_bytes(4000, 12) + b"</z>")]))
    both("document deleted", lambda c, r=rev: c.delete(f"/{db}/doc" + query(rev=r))["rev"])
    both("no attachments, numbers and Unicode", lambda c: data.put(c, db, "plain", {
        "float": 1.5, "exp": 1e3, "big": 12345678901234567890, "neg": -0.0, "s": "ünïcødé ✓", "nested": {"a": [None, True]}}))
    # Each server's copy replicated into the other's: nothing to write, no conflict.
    for runner, source, target in ((cdb, cdb, cte), (cte, cte, cdb)):
        history = runner.replicate(source, db, target, db)
        check(history.get("docs_written", 0) == 0, f"{runner.name} wrote {history.get('docs_written')} documents")
    outcome = expect_same(cdb, db, cte, db)
    for doc_id in ("mp", "plain"):
        check("_conflicts" not in cte.client.get(f"/{db}/{doc_id}" + query(conflicts=True)), f"{doc_id} has conflicts")
    return f"{len(steps)} edits gave identical revisions; replicated both ways: 0 docs written; {outcome.summary()}"


@scenario("Conflicts created on both sides, replicated both ways, then resolved on one side or the other")
def conflicts(env):
    cdb, cte = env.couchdb, env.couchette
    a, b = env.db("conflict-a"), env.db("conflict-b")
    cte.create(a)
    cdb.create(b)
    for i in range(20):
        data.put(cte.client, a, f"c{i}", {"i": i, "_attachments": {"base.txt": data.inline("text/plain", b"base %d" % i)}})
    cdb.replicate(cte, a, cdb, b)
    for side, db in ((cte, a), (cdb, b)):
        for i in range(10):
            doc = side.client.get(f"/{db}/c{i}")
            body = {"_rev": doc["_rev"], "i": i, "side": side.name, "_attachments": {"base.txt": {"stub": True}}}
            if i % 2:
                body["_attachments"][f"{side.name}.bin"] = data.inline("application/octet-stream", data.random_bytes(500, i))
            data.put(side.client, db, f"c{i}", body)
    cdb.replicate(cdb, b, cte, a)
    cte.replicate(cte, a, cdb, b)
    expect_same(cte, a, cdb, b)
    conflicted = [i for i in range(10) if "_conflicts" in cte.client.get(f"/{a}/c{i}" + query(conflicts=True))]
    check(len(conflicted) == 10, f"{len(conflicted)} of 10 documents in conflict")
    # Resolved: the losing leaf deleted, on Couchette for half, on CouchDB for the others.
    for side, db, numbers in ((cte, a, range(0, 5)), (cdb, b, range(5, 10))):
        for i in numbers:
            doc = side.client.get(f"/{db}/c{i}" + query(conflicts=True))
            for loser in doc["_conflicts"]:
                side.client.delete(f"/{db}/c{i}" + query(rev=loser))
    cte.replicate(cte, a, cdb, b)
    cdb.replicate(cdb, b, cte, a)
    outcome = expect_same(cte, a, cdb, b)
    left = [i for i in range(10) if "_conflicts" in cdb.client.get(f"/{b}/c{i}" + query(conflicts=True))]
    check(not left, f"documents still in conflict: {left}")
    return f"10 conflicts made, seen alike, resolved (5 on each side); {outcome.summary()}"


@scenario("_revs_limit 5 on both: histories stemmed alike through replication either way")
def revs_limit(env):
    cdb, cte = env.couchdb, env.couchette
    a, b = env.db("revs-a"), env.db("revs-b")
    cdb.create(a, revs_limit=5)
    cte.create(b, revs_limit=5)
    rev = None
    for n in range(12):
        rev = data.put(cdb.client, a, "stemmed", {"n": n, **({"_rev": rev} if rev else {})})
    cte.replicate(cdb, a, cte, b)
    for n in range(12, 15):
        rev = data.put(cte.client, b, "stemmed", {"n": n, "_rev": rev})
    cdb.replicate(cte, b, cdb, a)
    outcome = expect_same(cdb, a, cte, b)
    revisions = cte.client.get(f"/{b}/stemmed" + query(revs=True))["_revisions"]
    check(len(revisions["ids"]) <= 6, f"history of {len(revisions['ids'])} revisions kept")
    return f"15 edits, {len(revisions['ids'])} revisions kept on both (start {revisions['start']}); {outcome.summary()}"


@scenario("Purge on either side, then replication: purged documents and leaves stay away")
def purge(env):
    cdb, cte = env.couchdb, env.couchette
    a, b, c = env.db("purge-a"), env.db("purge-b"), env.db("purge-c")
    cte.create(a)
    cdb.create(b)
    cte.create(c)
    data.plain_documents(cte.client, a, 20)
    data.bulk(cte.client, a, [{"_id": "split", "_rev": "1-" + "1" * 32},
                              {"_id": "split", "_rev": "2-" + "2" * 32, "_revisions": {"start": 2, "ids": ["2" * 32, "1" * 32]}},
                              {"_id": "split", "_rev": "2-" + "3" * 32, "_revisions": {"start": 2, "ids": ["3" * 32, "1" * 32]}}],
              new_edits=False)

    def purge_on(side, db, doc_id, revs):
        answer = side.client.post(f"/{db}/_purge", {doc_id: revs})
        check(sorted(answer["purged"].get(doc_id, [])) == sorted(revs), f"{side.name} purged {answer}")

    purge_on(cte, a, "doc-000003", [cte.client.get(f"/{a}/doc-000003")["_rev"]])
    purge_on(cte, a, "split", ["2-" + "3" * 32])
    cdb.replicate(cte, a, cdb, b)
    expect_same(cte, a, cdb, b)
    purge_on(cdb, b, "doc-000004", [cdb.client.get(f"/{b}/doc-000004")["_rev"]])
    cte.replicate(cdb, b, cte, c)
    outcome = expect_same(cdb, b, cte, c)
    check(cte.client.request("GET", f"/{c}/doc-000003", expect=None)[0] == 404, "a purged document came back")
    return f"2 documents and 1 leaf purged; {outcome.summary()}"


@scenario("Filtered replication (JavaScript filter with query_params, selector, doc_ids, _view), "
          "each replicator filtering on the other's server")
def filters(env):
    cdb, cte = env.couchdb, env.couchette
    design = {"_id": "_design/f", "language": "javascript",
              "filters": {"by_type": "function(doc, req) { return doc.type === req.query.type; }"},
              "views": {"thirds": {"map": "function(doc) { if (doc.n % 3 === 0) emit(doc.n); }"}}}
    documents = [{"_id": f"f{n:02d}", "n": n, "type": "even" if n % 2 == 0 else "odd"} for n in range(60)]
    cases = [("JavaScript filter", {"filter": "f/by_type", "query_params": {"type": "even"}},
              {d["_id"] for d in documents if d["type"] == "even"}),
             ("selector", {"selector": {"n": {"$gt": 50}}}, {d["_id"] for d in documents if d["n"] > 50}),
             ("doc_ids", {"doc_ids": ["f07", "f11", "f42"]}, {"f07", "f11", "f42"}),
             ("_view", {"filter": "_view", "query_params": {"view": "f/thirds"}},
              {d["_id"] for d in documents if d["n"] % 3 == 0})]
    figures = []
    for runner, source, target in ((cdb, cte, cdb), (cte, cdb, cte)):
        src = env.db(f"filter-src-{runner.name.lower()}")
        source.create(src)
        data.bulk(source.client, src, [design] + documents)
        for label, options, expected in cases:
            tgt = env.db(f"filter-{runner.name.lower()}-{label.split()[0].lower().strip('_')}")
            target.create(tgt)
            runner.replicate(source, src, target, tgt, **options)
            got = {row["id"] for row in target.client.get(f"/{tgt}/_all_docs")["rows"]}
            check(got == expected, f"{runner.name} {label}: copied {sorted(got - expected)} too, missed {sorted(expected - got)}")
            expect_same(source, src, target, tgt, ids=sorted(expected))
        figures.append(f"{runner.name}: 4 filters, {sum(len(c[2]) for c in cases)} docs as expected")
    return "; ".join(figures)


@scenario("Partitioned databases replicated both ways")
def partitioned(env):
    cdb, cte = env.couchdb, env.couchette
    a, b, c = env.db("part-a"), env.db("part-b"), env.db("part-c")
    cte.create(a, partitioned=True)
    cdb.create(b, partitioned=True)
    cte.create(c, partitioned=True)
    docs = [{"_id": f"p{n % 4}:doc{n}", "n": n} for n in range(80)]
    docs += [{"_id": f"p9:att{n}", "_attachments": {"t.txt": data.inline("text/plain", data.text_bytes(1000 + n, n))}}
             for n in range(5)]
    data.bulk(cte.client, a, docs)
    cdb.replicate(cte, a, cdb, b)
    expect_same(cte, a, cdb, b)
    cte.replicate(cdb, b, cte, c)
    outcome = expect_same(cdb, b, cte, c)
    partition = cdb.client.get(f"/{b}/_partition/p1")
    check(partition["doc_count"] == 20, f"partition p1 holds {partition['doc_count']} documents on CouchDB")
    return f"85 documents in 5 partitions; {outcome.summary()}"


@scenario("_local documents: CouchDB's checkpoint form, and attachment paths refused alike")
def local_documents(env):
    answers = []
    for side in (env.couchdb, env.couchette):
        db = env.db("local")
        side.create(db)
        c = side.client
        first = c.put(f"/{db}/_local/cp", {"v": 1})["rev"]
        second = c.put(f"/{db}/_local/cp", {"_rev": first, "_revisions": {"start": 0, "ids": ["1"]}, "v": 2})["rev"]
        refused = c.request("GET", f"/{db}/_local/cp/att.txt", expect=None)
        bad = c.request("PUT", f"/{db}/_local/cp", {"_rev": second, "_revisions": {"start": "0", "ids": []}}, expect=None)
        answers.append((first, second, refused, bad))
    check(answers[0] == answers[1], f"CouchDB {answers[0]} != Couchette {answers[1]}")
    return f"same answers: revs {answers[0][0]}, {answers[0][1]}; {answers[0][2][0]} {answers[0][2][1]['reason']}"
