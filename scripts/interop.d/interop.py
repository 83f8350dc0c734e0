"""Runs the interop scenarios between Couchette and a real Apache CouchDB 3.4.3 (a single
node, then a three-node cluster), prints a results table and writes it to docs/interop.md.
See scripts/interop for the options."""

import argparse
import datetime
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback

import peers
import scenarios
from sides import Side

SKIPPED_STATUS = 3


class Environment:
    """What a scenario sees: both sides, restarts, the size of the run, unique names."""

    def __init__(self, couchdb, couchette, quick):
        self.couchdb_peer, self.couchette_peer = couchdb, couchette
        self.couchdb = Side("CouchDB", couchdb, is_couchette=False, credentials=peers.ADMIN)
        self.couchette = Side("Couchette", couchette, is_couchette=True)
        self.quick = quick

    def db(self, name):
        return "interop-" + name

    def restart_couchdb(self):
        self.couchdb_peer.restart()
        self.couchdb.client.close()

    def restart_couchette(self):
        self.couchette_peer.restart()
        self.couchette.client.close()


def run_peer(kind, release, binary, workdir, chosen, quick, log):
    """Every chosen scenario against one CouchDB (single node or cluster); rows of results."""
    rows = []
    couchdb = peers.CouchDB(release, os.path.join(workdir, kind), cluster=(kind == "cluster"))
    couchette = peers.Couchette(binary, os.path.join(workdir, kind))
    try:
        start = time.monotonic()
        couchdb.start()
        log(f"CouchDB {couchdb.version()} {kind} up in {time.monotonic() - start:.1f} s ({couchdb.url})")
        couchette.start()
        env = Environment(couchdb, couchette, quick)
        versions = (couchdb.version(), couchette.version())
        for function in chosen:
            log(f"[{kind}] {function.__name__} ...")
            start = time.monotonic()
            try:
                figures = function(env)
                status = "pass"
            except Exception as error:  # a failed scenario must not stop the others
                status = "FAIL"
                figures = f"{type(error).__name__}: {error}"
                log(traceback.format_exc())
            seconds = time.monotonic() - start
            log(f"[{kind}] {function.__name__}: {status} in {seconds:.1f} s — {figures}")
            rows.append({"scenario": function.__name__, "title": function.title, "peer": kind, "status": status,
                         "seconds": seconds, "figures": figures})
            if status == "FAIL" and not (couchdb_alive(couchdb) and couchette.process):
                log(f"[{kind}] a server died; logs:\n{couchdb.log_tail()}\n{couchette.log_tail()}")
                break
        return rows, versions
    finally:
        couchette.stop()
        couchdb.stop()
        couchdb.stop_epmd()


def couchdb_alive(couchdb):
    return all(node.process and node.process.poll() is None for node in couchdb.nodes)


def table(rows):
    lines = ["| Scenario | CouchDB | Result | Time | Figures |", "|---|---|---|---|---|"]
    for row in rows:
        figures = str(row["figures"]).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {row['title']} (`{row['scenario']}`) | {row['peer']} | {row['status']} | "
                     f"{row['seconds']:.1f} s | {figures} |")
    return "\n".join(lines)


def write_document(path, rows, versions, started, quick):
    couchdb_version, couchette_version = versions
    passed = sum(row["status"] == "pass" for row in rows)
    text = f"""# Interoperability with Apache CouchDB

`scripts/interop` replicates between Couchette and a real Apache CouchDB, with both
replicators in both directions, and compares the two databases document by document after
every scenario: each leaf revision (deleted ones included) with its history, body and
attachments (metadata, digest, encoding, bytes), each document's winner, `_conflicts` and
`_deleted_conflicts`, and the document counts. Its latest results are below.

- [Running it](#running-it)
- [Latest results](#latest-results)

## Running it

The scenarios need a built Apache CouchDB {peers.RELEASE_VERSION} release. The repository deliberately
holds no recipe that builds CouchDB (its sources are fetched code): build it yourself from
CouchDB's {peers.RELEASE_VERSION} source release, following CouchDB's own instructions (`INSTALL.Unix.md`:
Erlang/OTP, a JavaScript engine, then `./configure` — the results below come from
`./configure --disable-docs --disable-fauxton --js-engine=quickjs`, which needs no SpiderMonkey —
and `make release`), and point `COUCHDB_RELEASE` at the resulting `rel/couchdb` directory (or
place it, or a link to it, at `~/.cache/couchette/couchdb-{peers.RELEASE_VERSION}`). Then:

    scripts/interop                 # every scenario, single node then three-node cluster (~15-25 minutes)
    scripts/interop --quick         # the subset scripts/test runs (single node, ~1 minute)
    scripts/interop --only long_push,identical_revisions --peers cluster

Without a release the scenarios are reported SKIPPED, with the reason, and the script exits
with status {SKIPPED_STATUS}; `scripts/test` then says so and goes on. Each CouchDB node runs from its
own copy of the release in a temporary directory, on free loopback ports, with its own Erlang
port mapper (`ERL_EPMD_PORT`); every process started is stopped at the end. The single node
is `q=2, n=1`; the cluster three nodes, `q=8, n=3`. Couchette is the debug build
(`.build/debug/couchette`, or `--binary`), so its times are a debug build's.

## Latest results

Apache CouchDB {couchdb_version} against Couchette {couchette_version}, {started:%Y-%m-%d}
({"quick subset" if quick else "every scenario"}; {passed} of {len(rows)} passed; {platform.machine()},
{os.cpu_count()} cores shared with other work).

{table(rows)}
"""
    with open(path, "w") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--peers", default="single,cluster")
    parser.add_argument("--binary", default=".build/debug/couchette")
    parser.add_argument("--write-docs", default=None, help="the page to write the results to")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()

    def log(text):
        print(text, file=sys.stderr, flush=True)

    # Stopped from outside (a timeout, Ctrl-C): unwind, so that every server started is stopped.
    def interrupted(number, _frame):
        raise KeyboardInterrupt(f"signal {number}")
    signal.signal(signal.SIGTERM, interrupted)

    release, reason = peers.find_release()
    if not release:
        print(f"interop: SKIPPED — no Apache CouchDB {peers.RELEASE_VERSION} release: {reason}. Build one from "
              f"CouchDB's sources and set COUCHDB_RELEASE to its rel/couchdb (see docs/interop.md).")
        return SKIPPED_STATUS
    chosen = [s for s in scenarios.SCENARIOS if (not options.quick or s.quick)
              and (not options.only or s.__name__ in options.only.split(","))]
    unknown = set(filter(None, options.only.split(","))) - {s.__name__ for s in scenarios.SCENARIOS}
    if unknown or not chosen:
        log(f"interop: unknown scenarios {sorted(unknown)}; known: {[s.__name__ for s in scenarios.SCENARIOS]}")
        return 2
    kinds = ["single"] if options.quick else [k for k in options.peers.split(",") if k]
    workdir = tempfile.mkdtemp(prefix="couchette-interop.")
    started = datetime.datetime.now()
    rows, versions = [], None
    try:
        for kind in kinds:
            peer_rows, versions = run_peer(kind, release, os.path.abspath(options.binary), workdir, chosen,
                                           options.quick, log)
            rows += peer_rows
    finally:
        if options.keep:
            log(f"interop: kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nApache CouchDB {versions[0]} ({release}) against Couchette {versions[1]}:\n")
    print(table(rows))
    failed = [row for row in rows if row["status"] != "pass"]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} scenario runs passed.")
    if options.write_docs:
        write_document(options.write_docs, rows, versions, started, options.quick)
        log(f"interop: results written to {options.write_docs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
