#!/usr/bin/env python3
"""The workloads of scripts/bench (issue 7), run against Couchette and its references.

Called by scripts/bench after it has built Couchette and the C references; run
`scripts/bench --help` for the options. Standard library only.

Every figure is paired with a reference measured in the same run on the same machine:
  * mhd_fixed   minimal libmicrohttpd server answering a fixed body (ceiling for a request)
  * sqlite_ref  the same rows inserted into SQLite with Couchette's schema and pragmas
                (ceiling for writes), and read back (ceiling for scans)
and the rows without a natural external reference compare Couchette with itself
(10 writers against 1 writer) or state an absolute target from the issue.

Everything started here (servers, wrk, curl) is stopped on exit, on SIGINT/SIGTERM/SIGHUP
and, through PR_SET_PDEATHSIG, even if this process is killed; data lives in a
temporary directory that is removed at the end.
"""
import argparse
import ctypes
import datetime
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import feeds  # noqa: E402  (beside this file)
import functions  # noqa: E402  (beside this file)
import views  # noqa: E402  (beside this file)
import mango  # noqa: E402
import partitions  # noqa: E402
import paging  # noqa: E402
BANNER = re.compile(rb"listening on http://[^:/]+:(\d+)/")
DB = "bench"                       # the database loaded by _bulk_docs and read by the other rows
ID_FORMAT = "bench-%07d"           # document ids, fixed width so every document has the same size
DOC_BYTES = 1024                   # size of a document as sent in _bulk_docs, _id included
WORKLOADS = ["bulk_docs", "get_c10", "get_c100", "get_logged", "put_c1", "put_c10", "changes", "all_docs", "feed_latency",
             "replication", "idle_rss_after_load", "filter_changes", "validate_bulk_docs", "view_build", "view_query",
             "view_query_docs", "view_reduce", "mango_find", "partition_query", "paging", "feeds_at_scale", "startup",
             "idle_rss"]
# The million-document run (--million) loads the database and measures what grows with it.
MILLION_WORKLOADS = {"bulk_docs", "replication", "idle_rss_after_load", "view_build", "view_reduce", "mango_find",
                     "paging"}


class Settings:
    """How much work each mode does; every loop below is bounded by these."""

    def __init__(self, quick, million=False):
        self.mode = "million" if million else "quick" if quick else "full"
        self.docs = 1_000_000 if million else 20_000 if quick else 100_000
        self.wrk_seconds = 3 if quick else 10
        self.repeats = 1 if quick else 2          # alternating Couchette/reference runs; best kept
        self.latency_samples = 50 if quick else 200
        self.single_commit_rows = 1_000_000       # bounded by time: as long as a wrk run
        self.scan_runs = 2 if quick else 3
        self.scan_timed_runs = 5  # `_changes` and `_all_docs`: best of five, each side
        self.startup_runs = 3 if quick else 5
        self.replication_timeout = 30 if quick else 300
        self.deadline_seconds = 7200 if million else 300 if quick else 1800   # whole run, whatever happens


# ----------------------------------------------------------------------------- processes

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    """In the child before exec: get SIGKILL if the benchmark process dies."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Process:
    """A server started by the benchmark, whose first stdout line names its port."""

    started = []  # every Process ever started, stopped by stop_all()
    forced = []   # names of processes that ignored SIGTERM and had to be killed

    def __init__(self, name, argv, log_path):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.started_at = time.perf_counter()
        self.popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=self.log, preexec_fn=_die_with_parent)
        Process.started.append(self)
        self.port = None

    @property
    def pid(self):
        return self.popen.pid

    def wait_for_port(self, timeout=15):
        """Reads the banner line; returns the port."""
        fd = self.popen.stdout.fileno()
        data = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in data:
            if self.popen.poll() is not None:
                raise BenchError(f"{self.name} exited with {self.popen.returncode} before listening; "
                                 f"log:\n{self.log_tail()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"{self.name} printed no banner within {timeout}s")
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.05))
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    continue
                data += chunk
        match = BANNER.search(data)
        if not match:
            raise BenchError(f"{self.name}: unexpected first line {data!r}")
        self.port = int(match.group(1))
        # Keep draining stdout so the server can never block on a full pipe.
        threading.Thread(target=self._drain, daemon=True).start()
        return self.port

    def _drain(self):
        try:
            for line in self.popen.stdout:
                self.log.write(line)
        except (OSError, ValueError):
            pass

    def status_kb(self, key):
        """VmHWM, VmRSS, ... from /proc/PID/status, in kB (None if gone)."""
        try:
            with open(f"/proc/{self.pid}/status") as status:
                for line in status:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def cpu_seconds(self):
        """User + system CPU time of the process so far."""
        try:
            with open(f"/proc/{self.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def reset_peak(self):
        """Resets VmHWM to the current RSS, so the next reading is this workload's peak."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as clear:
                clear.write("5")
        except OSError:
            pass

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, "rb") as log:
                return b"".join(log.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout=10):
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                Process.forced.append(f"{self.name} (pid {self.pid})")
                self.popen.kill()
                self.popen.wait(5)
        self.log.close()

    @classmethod
    def stop_all(cls):
        for process in reversed(cls.started):
            try:
                process.stop()
            except Exception as error:  # keep stopping the others
                print(f"bench: stopping {process.name}: {error}", file=sys.stderr)


class BenchError(Exception):
    pass


# ----------------------------------------------------------------------------- HTTP helpers

def http_request(port, method, path, body=None, headers=None, timeout=60):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def expect(status, data, allowed, what):
    if status not in allowed:
        raise BenchError(f"{what}: HTTP {status}: {data[:300]!r}")


def wait_until_up(port, timeout):
    """Polls GET / until it answers 200; returns when it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, _ = http_request(port, "GET", "/", timeout=2)
            if status == 200:
                return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.001)
    raise BenchError(f"GET / on port {port} did not answer 200 within {timeout}s")


# ----------------------------------------------------------------------------- documents

def document(index):
    """The JSON text of document `index`, exactly DOC_BYTES long with its _id."""
    doc_id = ID_FORMAT % index
    head = ('{"_id":"%s","type":"bench","index":%d,"title":"Benchmark document %d",'
            '"tags":["alpha","beta","gamma"],"created":"2026-01-01T00:00:00Z","nested":{"a":1,"b":[1,2,3],'
            '"c":{"d":true,"e":null}},"text":"' % (doc_id, index, index))
    tail = '"}'
    filler = "lorem ipsum dolor sit amet " * 40
    return head + filler[: DOC_BYTES - len(head) - len(tail)] + tail


def stored_body(index):
    """The body Couchette stores for document `index` (the document minus its _id)."""
    return document(index).replace('"_id":"%s",' % (ID_FORMAT % index), "", 1)


# ----------------------------------------------------------------------------- load generators

def run_wrk(port, script, script_args, connections, threads, seconds):
    """Runs wrk; returns requests/s and the parsed WRK_JSON report."""
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
            "-s", os.path.join(HERE, script), f"http://127.0.0.1:{port}", "--", *map(str, script_args)]
    result = subprocess.run(argv, capture_output=True, timeout=seconds + 60, preexec_fn=_die_with_parent)
    report = None
    for line in result.stdout.decode(errors="replace").splitlines():
        if line.startswith("WRK_JSON "):
            report = json.loads(line[len("WRK_JSON "):])
    if result.returncode != 0 or report is None:
        raise BenchError(f"wrk failed ({result.returncode}): {result.stderr.decode(errors='replace')[-500:]}")
    report["errors"] = sum(report[key] for key in report if key.startswith("errors_"))
    report["requests_per_second"] = report["requests"] / (report["duration_us"] / 1e6)
    return report["requests_per_second"], report


def timed_download(port, path, output_path, timeout):
    """GETs path with curl (a C client, so the client is not the bottleneck); returns seconds."""
    argv = ["curl", "-sS", "--max-time", str(timeout), "-o", output_path,
            "-w", "%{http_code} %{time_total} %{size_download}", f"http://127.0.0.1:{port}{path}"]
    result = subprocess.run(argv, capture_output=True, timeout=timeout + 10, preexec_fn=_die_with_parent)
    fields = result.stdout.decode().split()
    if result.returncode != 0 or len(fields) != 3 or fields[0] != "200":
        raise BenchError(f"GET {path}: curl {result.returncode} {result.stdout!r} {result.stderr!r}")
    return float(fields[1]), int(fields[2])


def sqlite_reference(binary, *args, timeout=600):
    result = subprocess.run([binary, *map(str, args)], capture_output=True, timeout=timeout,
                            preexec_fn=_die_with_parent)
    if result.returncode != 0:
        raise BenchError(f"sqlite_ref {args[0]} failed: {result.stderr.decode(errors='replace')}")
    return json.loads(result.stdout)


class ContinuousFeed:
    """A continuous _changes feed read on its own thread, stamping each row on arrival."""

    def __init__(self, port, db):
        self.arrivals = {}
        self.condition = threading.Condition()
        self.closed = False
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.socket.sendall((f"GET /{db}/_changes?feed=continuous&since=now&heartbeat=10000 HTTP/1.1\r\n"
                             f"Host: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n").encode())
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buffer = b""
        headers_done = False
        chunked = False
        body = b""
        try:
            while not self.closed:
                data = self.socket.recv(65536)
                now = time.perf_counter()
                if not data:
                    break
                buffer += data
                if not headers_done:
                    end = buffer.find(b"\r\n\r\n")
                    if end < 0:
                        continue
                    head = buffer[:end].lower()
                    chunked = b"transfer-encoding: chunked" in head
                    buffer = buffer[end + 4:]
                    headers_done = True
                if chunked:
                    while True:
                        line_end = buffer.find(b"\r\n")
                        if line_end < 0:
                            break
                        size = int(buffer[:line_end].split(b";")[0] or b"0", 16)
                        if size == 0:
                            self.closed = True
                            break
                        if len(buffer) < line_end + 2 + size + 2:
                            break
                        body += buffer[line_end + 2: line_end + 2 + size]
                        buffer = buffer[line_end + 2 + size + 2:]
                else:
                    body += buffer
                    buffer = b""
                *lines, body = body.split(b"\n")
                for line in lines:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if "id" in row:
                        with self.condition:
                            self.arrivals.setdefault(row["id"], now)
                            self.condition.notify_all()
        except OSError:
            pass
        finally:
            with self.condition:
                self.closed = True
                self.condition.notify_all()

    def wait_for(self, doc_id, timeout):
        deadline = time.monotonic() + timeout
        with self.condition:
            while doc_id not in self.arrivals and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.condition.wait(remaining)
            return self.arrivals.get(doc_id)

    def close(self):
        self.closed = True
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.socket.close()


# ----------------------------------------------------------------------------- the run

class Bench:
    def __init__(self, options):
        self.options = options
        self.settings = Settings(options.quick, options.million)
        self.couchette = options.couchette
        self.mhd = os.path.join(options.refs, "mhd_fixed")
        self.sqlite = os.path.join(options.refs, "sqlite_ref")
        self.workdir = tempfile.mkdtemp(prefix="couchette-bench-")
        self.rows = []
        self.values = {}   # figures some rows reuse as references

    # --- plumbing

    def log(self, message):
        print(f"bench: {message}", file=sys.stderr, flush=True)

    def start_couchette(self, name, data_dir, extra=()):
        process = Process(name, [self.couchette, "serve", "--port", "0", "--bind", "127.0.0.1",
                                 "--data-dir", data_dir, "--log-level", "warning",
                                 "--threads", str(self.options.threads), *extra],
                          os.path.join(self.workdir, name + ".log"))
        process.wait_for_port()
        return process

    def start_mhd(self, body_bytes):
        process = Process("mhd_fixed", [self.mhd, "0", str(self.options.threads), str(body_bytes)],
                          os.path.join(self.workdir, "mhd_fixed.log"))
        process.wait_for_port()
        return process

    def wanted(self, workload):
        if self.options.only:
            return workload in self.options.only
        return workload in MILLION_WORKLOADS if self.options.million else True

    def add(self, workload, name, unit, couchette, reference=None, reference_name="", target="",
            met=None, peak_kb=None, status="ok", note="", details=None, ratio=None):
        if ratio is None and isinstance(couchette, (int, float)) and isinstance(reference, (int, float)) and reference:
            ratio = couchette / reference
        row = {"workload": workload, "name": name, "unit": unit, "couchette": couchette,
               "reference": reference, "reference_name": reference_name, "ratio": ratio,
               "target": target, "met": met, "peak_rss_kb": peak_kb, "status": status,
               "note": note, "details": details or {}}
        self.rows.append(row)
        shown = format_value(couchette, unit) if status == "ok" else status
        self.log(f"{name}: {shown}" + (f" (reference {format_value(reference, unit)})" if reference else ""))

    def measure(self, process, action):
        """Runs action(); returns its result, the process's peak RSS during it (kB) and the
        CPU time (user + system, seconds) the process spent meanwhile."""
        process.reset_peak()
        cpu_before = process.cpu_seconds()
        result = action()
        return result, process.status_kb("VmHWM"), process.cpu_seconds() - cpu_before

    # --- workloads

    def run(self):
        s = self.settings
        self.log(f"{s.mode} mode: {s.docs:,} documents, wrk {s.wrk_seconds}s x {s.repeats}, "
                 f"{self.options.threads} server threads; work in {self.workdir}")
        body_path = os.path.join(self.workdir, "body.json")
        with open(body_path, "w") as body_file:
            body_file.write(stored_body(0))

        data_a = os.path.join(self.workdir, "a")
        server = self.start_couchette("couchette-a", data_a)
        self.log(f"Couchette listening on port {server.port} (pid {server.pid})")
        for db in (DB, "put1", "put10", "feed"):
            expect(*http_request(server.port, "PUT", "/" + db), (201, 202), f"PUT /{db}")

        self.bulk_docs(server, body_path)
        self.get_documents(server)
        self.get_logged(server)
        self.put_documents(server)
        self.scans(server)
        self.feed_latency(server)
        self.replication(server)
        if self.wanted("idle_rss_after_load"):
            # Issue 17's measure: after the workloads and 10 s idle (the server trims its
            # allocator once a second passes with no request).
            time.sleep(10)
            rss = server.status_kb("VmRSS")
            self.add("idle_rss_after_load", "Idle RSS after the workloads and 10 s idle", "MB", kb_to_mb(rss),
                     note="target (issue 17): within 1.5× the idle RSS of a fresh start",
                     peak_kb=server.status_kb("VmHWM"))
        # Design-document functions last: their contexts would count in the idle memory above.
        try:
            if self.wanted("filter_changes"):
                functions.filter_changes(self, server, http_request, expect, document, ID_FORMAT, DB)
            if self.wanted("validate_bulk_docs"):
                functions.validated_bulk_docs(self, server, http_request, expect, document)
            if any(self.wanted(name) for name in ("view_build", "view_query", "view_query_docs", "view_reduce")):
                views.views(self, server, http_request, expect, DB, document)
            if self.wanted("mango_find"):
                mango.mango_find(self, server, expect, DB)
            if self.wanted("partition_query"):
                partitions.partition_query(self, server, expect)
            if self.wanted("paging"):
                paging.paging(self, server, http_request, expect, DB, ID_FORMAT)
        except RuntimeError as failure:
            raise BenchError(str(failure))
        server.stop()
        if self.wanted("feeds_at_scale"):
            feeds.feeds_at_scale(self, self.start_couchette, http_request, expect, kb_to_mb)
        self.startup(data_a)

    def bulk_docs(self, server, body_path):
        """Loads the database every later read uses, and measures it (POST /_bulk_docs, 1,000 a request)."""
        s = self.settings
        batches = []
        for start in range(0, s.docs, 1000):
            docs = ",".join(document(i) for i in range(start, min(start + 1000, s.docs)))
            batches.append(('{"docs":[' + docs + "]}").encode())
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        answers = []

        def load():
            began = time.perf_counter()
            for body in batches:
                connection.request("POST", f"/{DB}/_bulk_docs", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                answers.append((response.status, response.read()))
                if time.perf_counter() - began > 600:
                    raise BenchError("_bulk_docs load took over 600 s")
            return time.perf_counter() - began

        seconds, peak, cpu = self.measure(server, load)
        connection.close()
        written = 0
        for status, data in answers:
            expect(status, data, (201,), "POST _bulk_docs")
            written += sum(1 for result in json.loads(data) if result.get("ok"))
        if written != s.docs:
            raise BenchError(f"_bulk_docs wrote {written} of {s.docs} documents")
        rate = s.docs / seconds
        self.values["bulk_rate"] = rate

        reference = sqlite_reference(self.sqlite, "insert", os.path.join(self.workdir, "ref-batched.db"),
                                     body_path, s.docs, 1000, 300)
        self.values["ref_batched_db"] = os.path.join(self.workdir, "ref-batched.db")
        ratio = rate / reference["rows_per_second"]
        if self.wanted("bulk_docs"):
            self.add("bulk_docs", f"POST _bulk_docs, 1,000 docs/request, {s.docs:,} docs", "docs/s", rate,
                     reference["rows_per_second"], "SQLite insert, 1,000 rows/transaction",
                     "≥ 0.5× SQLite", ratio >= 0.5, peak,
                     note=f"server CPU per document {cpu / s.docs * 1e6:.0f} µs",
                     details={"seconds": seconds, "requests": len(batches), "server_cpu_seconds": cpu,
                              "server_cpu_us_per_doc": cpu / s.docs * 1e6, "reference": reference})


    def get_documents(self, server):
        s = self.settings
        wanted = [c for c in (10, 100) if self.wanted(f"get_c{c}")]
        if not wanted:
            return
        status, data = http_request(server.port, "GET", f"/{DB}/{ID_FORMAT % 0}")
        expect(status, data, (200,), "GET a document")
        reference = self.start_mhd(len(data))
        best = {}
        peaks = {}
        for _ in range(s.repeats):
            for connections in wanted:
                for name, process in (("couchette", server), ("reference", reference)):
                    (rate, report), peak, cpu = self.measure(process, lambda: run_wrk(
                        process.port, "get.lua", [DB, s.docs, ID_FORMAT], connections,
                        min(2, connections), s.wrk_seconds))
                    report["server_cpu_us_per_request"] = cpu / report["requests"] * 1e6
                    if report["errors"]:
                        raise BenchError(f"GET on {name} with {connections} connections: {report}")
                    key = (name, connections)
                    if rate > best.get(key, (0, None))[0]:
                        best[key] = (rate, report)
                    if name == "couchette":
                        peaks[connections] = max(peaks.get(connections, 0), peak or 0)
        reference.stop()
        for connections in wanted:
            rate, report = best[("couchette", connections)]
            reference_rate, reference_report = best[("reference", connections)]
            ratio = rate / reference_rate
            self.add(f"get_c{connections}", f"GET /db/doc (1 KB), {connections} connections", "req/s", rate,
                     reference_rate, "libmicrohttpd fixed body", "≥ 0.7× reference (issue 17)", ratio >= 0.7,
                     peaks[connections],
                     note=f"server CPU per request {report['server_cpu_us_per_request']:.0f} µs "
                          f"(reference {reference_report['server_cpu_us_per_request']:.0f} µs)",
                     details={"body_bytes": len(data), "wrk": report, "reference_wrk": reference_report})

    def get_logged(self, server):
        """`GET` with 10 connections at the default log level (a line per request) against the
        same server at `warning`, as every other row runs it: what a user's default costs."""
        if not self.wanted("get_logged"):
            return
        s = self.settings
        best = {}
        cpu_per_request = {}
        try:
            for _ in range(s.repeats):
                for level in ("warning", "info"):
                    status, data = http_request(server.port, "PUT", "/_node/_local/_config/log/level",
                                                body=json.dumps(level).encode())
                    expect(status, data, (200,), f"set the log level to {level}")
                    (rate, report), _, cpu = self.measure(server, lambda: run_wrk(
                        server.port, "get.lua", [DB, s.docs, ID_FORMAT], 10, 2, s.wrk_seconds))
                    if report["errors"]:
                        raise BenchError(f"GET at log level {level}: {report}")
                    if rate > best.get(level, 0):
                        best[level] = rate
                        cpu_per_request[level] = cpu / report["requests"] * 1e6
        finally:
            http_request(server.port, "PUT", "/_node/_local/_config/log/level", body=json.dumps("warning").encode())
        self.add("get_logged", "GET /db/doc (1 KB), 10 connections, default log level (info)", "req/s",
                 best["info"], best["warning"], "the same at --log-level warning", "—", None, None,
                 note=f"server CPU per request {cpu_per_request['info']:.0f} µs "
                      f"({cpu_per_request['warning']:.0f} µs without the request log line)")

    def put_documents(self, server):
        s = self.settings
        if not (self.wanted("put_c1") or self.wanted("put_c10")):
            return
        body_path = os.path.join(self.workdir, "body.json")
        best = {}
        peaks = {}
        single = None
        for repeat in range(s.repeats):
            # Durable writes wait on fsync, which is slow while earlier writes are still being
            # written back: settle the disk first, for the reference and Couchette alike.
            os.sync()
            reference = sqlite_reference(self.sqlite, "insert",
                                         os.path.join(self.workdir, f"ref-single-{repeat}.db"), body_path,
                                         s.single_commit_rows, 1, s.wrk_seconds)
            if single is None or reference["rows_per_second"] > single["rows_per_second"]:
                single = reference
            for connections in (1, 10):
                os.sync()
                db = f"put{connections}"
                (rate, report), peak, cpu = self.measure(server, lambda: run_wrk(
                    server.port, "put.lua", [db, body_path, f"r{repeat}"], connections,
                    min(2, connections), s.wrk_seconds))
                report["server_cpu_us_per_request"] = cpu / report["requests"] * 1e6
                if report["errors"]:
                    raise BenchError(f"PUT with {connections} connections: {report}")
                if rate > best.get(connections, (0, None))[0]:
                    best[connections] = (rate, report)
                peaks[connections] = max(peaks.get(connections, 0), peak or 0)
        single_rate, single_report = best[1]
        ten_rate, ten_report = best[10]
        self.values["put_c1"] = single_rate
        if self.wanted("put_c1"):
            # One writer waits for each answer before its next request, so no server can beat a
            # round trip plus a commit: shown beside the goal's reference, which has neither
            # the round trip nor HTTP.
            round_trip = self.put_round_trip(body_path)
            bound = 1 / (1 / round_trip + 1 / single["rows_per_second"])
            self.add("put_c1", "PUT new 1 KB doc, 1 writer (durable)", "req/s", single_rate,
                     single["rows_per_second"], "SQLite, 1 row/transaction (fsync'd)",
                     "≥ 0.8× SQLite (issue 17)", single_rate >= 0.8 * single["rows_per_second"], peaks[1],
                     note=f"server CPU per request {single_report['server_cpu_us_per_request']:.0f} µs; "
                          f"a server that spent nothing on the request would reach {bound:,.0f} req/s "
                          f"({bound / single['rows_per_second']:.2f}× SQLite: the commit after a bare "
                          f"libmicrohttpd PUT round trip, {round_trip:,.0f}/s), Couchette "
                          f"{single_rate / bound:.2f}× that",
                     details={"wrk": single_report, "reference": single, "bare_put_round_trips": round_trip,
                              "round_trip_and_commit_bound": bound})
        if self.wanted("put_c10"):
            ratio = ten_rate / single_rate
            self.add("put_c10", "PUT new 1 KB doc, 10 writers (group commit)", "req/s", ten_rate,
                     single_rate, "Couchette, 1 writer (row above)", "≥ 5× one writer", ratio >= 5,
                     peaks[10], details={"wrk": ten_report},
                     note=f"server CPU per request {ten_report['server_cpu_us_per_request']:.0f} µs")

    def put_round_trip(self, body_path):
        """The best rate of one connection's `PUT`s of the body against bare libmicrohttpd."""
        reference = self.start_mhd(len(b'{"ok":true,"id":"bench-0000000","rev":"1-0123456789abcdef0123456789abcdef"}'))
        try:
            return max(run_wrk(reference.port, "put.lua", ["db", body_path, f"bare{repeat}"], 1, 1,
                               self.settings.wrk_seconds)[0] for repeat in range(self.settings.repeats))
        finally:
            reference.stop()

    def scans(self, server):
        s = self.settings
        reference_db = self.values["ref_batched_db"]
        # _changes first: memory a response takes is not all given back, and the peak of the
        # second scan starts from what the first one left.
        for workload, path, order, name, target in (
                ("changes", f"/{DB}/_changes?since=0", ("sequence", "metadata"),
                 f"GET _changes?since=0, {s.docs:,} docs", 300_000),
                ("all_docs", f"/{DB}/_all_docs?include_docs=true", ("doc_id", "bodies"),
                 f"GET _all_docs?include_docs=true, {s.docs:,} docs", None)):
            if not self.wanted(workload):
                continue
            output = os.path.join(self.workdir, workload + ".json")
            server.reset_peak()
            # The answer is checked from a download of its own, untimed: writing ~25 MB to a
            # file made the first timed run the slowest, and a figure of tens of milliseconds
            # on a shared machine needs more than two runs to show its floor.
            timed_download(server.port, path, output, 300)
            timings = []
            for _ in range(s.scan_timed_runs):
                seconds, size = timed_download(server.port, path, "/dev/null", 300)
                timings.append(seconds)
            peak = server.status_kb("VmHWM")
            with open(output, "rb") as answer:
                parsed = json.load(answer)
            rows = parsed.get("rows") if workload == "all_docs" else parsed.get("results")
            if rows is None or len(rows) != s.docs:
                raise BenchError(f"{path} returned {len(rows or [])} rows, expected {s.docs}")
            if workload == "all_docs" and "doc" not in rows[0]:
                raise BenchError(f"{path} rows lack include_docs")
            os.remove(output)
            rate = s.docs / min(timings)
            reference = max((sqlite_reference(self.sqlite, "scan", reference_db, *order)
                             for _ in range(s.scan_timed_runs)), key=lambda r: r["rows_per_second"])
            # Issue 17: at least half the scan's pace; `_changes` also keeps issue 7's floor.
            met = rate >= 0.5 * reference["rows_per_second"] and (target is None or rate >= target)
            self.add(workload, name, "rows/s", rate, reference["rows_per_second"],
                     f"SQLite scan by {order[0]}, " + ("with bodies" if order[1] == "bodies" else "no bodies"),
                     ("≥ 300,000 rows/s, " if target else "") + "≥ 0.5× SQLite (issue 17)", met, peak,
                     details={"seconds": timings, "response_bytes": size, "reference": reference})

    def feed_latency(self, server):
        s = self.settings
        if not self.wanted("feed_latency"):
            return
        feed = ContinuousFeed(server.port, "feed")
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        body = stored_body(0).encode()
        headers = {"Content-Type": "application/json"}

        def put(doc_id):
            sent = time.perf_counter()
            connection.request("PUT", f"/feed/{doc_id}", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            expect(response.status, data, (201, 202), f"PUT /feed/{doc_id}")
            return sent, time.perf_counter()

        os.sync()
        server.reset_peak()
        try:
            # The feed is attached once a first write reaches it.
            deadline = time.monotonic() + 10
            warm = 0
            while True:
                put(f"warm-{warm}")
                if feed.wait_for(f"warm-{warm}", 1.0) is not None:
                    break
                warm += 1
                if time.monotonic() > deadline:
                    raise BenchError("the continuous feed delivered no row within 10 s")
            arrivals, acknowledgements, after_ack, missing = [], [], [], 0
            began = time.monotonic()
            for sample in range(s.latency_samples):
                doc_id = f"latency-{sample:05d}"
                sent, acknowledged = put(doc_id)
                arrived = feed.wait_for(doc_id, 2.0)
                if arrived is None:
                    missing += 1
                else:
                    arrivals.append((arrived - sent) * 1000)
                    after_ack.append((arrived - acknowledged) * 1000)
                acknowledgements.append((acknowledged - sent) * 1000)
                time.sleep(0.002)
                if time.monotonic() - began > 60:
                    break
        finally:
            connection.close()
            feed.close()
        peak = server.status_kb("VmHWM")
        if not arrivals:
            self.add("feed_latency", "Continuous _changes latency", "ms", None, status="failed",
                     note="no row arrived on the feed")
            return
        # A PUT is acknowledged only after its fsync'd commit, and the feed row can only be
        # sent after that commit too: sent -> arrival bounds commit -> arrival from above,
        # and arrival - acknowledgement (plus the ack's own transit, tens of µs) estimates it.
        median = statistics.median(arrivals)
        ack_median = statistics.median(acknowledgements)
        commit_estimate = statistics.median(after_ack)
        summary = {"samples": len(arrivals), "missing": missing,
                   "sent_to_row_median_ms": median, "sent_to_row_p99_ms": percentile(arrivals, 99),
                   "sent_to_row_max_ms": max(arrivals),
                   "ack_median_ms": ack_median, "ack_p99_ms": percentile(acknowledgements, 99),
                   "row_after_ack_median_ms": commit_estimate, "row_after_ack_p99_ms": percentile(after_ack, 99)}
        self.add("feed_latency", "Continuous _changes: commit → row on feed (median, est.)", "ms",
                 commit_estimate, ack_median, "PUT round trip, sent → ack", "< 5 ms median",
                 commit_estimate < 5, peak,
                 note=(f"estimated as row arrival − PUT ack (p99 {summary['row_after_ack_p99_ms']:.2f} ms; "
                       f"negative: the row beat the ack); PUT sent → row: median {median:.2f} ms, "
                       f"p99 {summary['sent_to_row_p99_ms']:.2f} ms, over {len(arrivals)} samples"
                       + (f", {missing} lost" if missing else "")),
                 details=summary)

    def replication(self, server):
        """POST /_replicate on server A from A/bench to B/dst (created); docs/s until done."""
        s = self.settings
        if not self.wanted("replication"):
            return
        target = self.start_couchette("couchette-b", os.path.join(self.workdir, "b"))
        request = {"source": f"http://127.0.0.1:{server.port}/{DB}",
                   "target": f"http://127.0.0.1:{target.port}/dst", "create_target": True}
        name = f"Replication of {s.docs:,} docs between two servers"
        answer = {}

        def post():
            # A one-shot replication answers 200 at once and its body when done: wait for both.
            try:
                answer["status"], answer["data"] = http_request(server.port, "POST", "/_replicate", request,
                                                                timeout=s.replication_timeout)
            except OSError as error:
                answer["error"] = repr(error)
            answer["at"] = time.perf_counter()

        server.reset_peak()
        began = time.perf_counter()
        poster = threading.Thread(target=post, daemon=True)
        poster.start()
        count = 0
        done_at = None
        deadline = began + s.replication_timeout
        while time.perf_counter() < deadline:
            poster.join(0.25)
            code, info = http_request(target.port, "GET", "/dst")
            count = json.loads(info).get("doc_count", 0) if code == 200 else 0
            if count >= s.docs:
                done_at = done_at or time.perf_counter()
            if not poster.is_alive() and (count >= s.docs or answer.get("status") not in (200, 201, 202)):
                break
        peak = server.status_kb("VmHWM")
        target_peak = target.status_kb("VmHWM")
        target.stop()
        status, data = answer.get("status"), answer.get("data", b"")
        text = data[:300].decode(errors="replace")
        if status in (404, 405, 501) or (status == 400 and b"illegal_database_name" in data):
            # No such route: a 400 illegal_database_name means /_replicate was read as a database name.
            self.add("replication", name, "docs/s", None, status="n/a (no replicator yet)",
                     note=f"POST /_replicate answered {status} {error_name(data)}".rstrip(),
                     details={"status": status, "answer": text})
            return
        failure = None
        if "error" in answer:
            failure = f"POST /_replicate got no answer: {answer['error']}"
        elif status is None:
            failure = f"POST /_replicate had not answered after {s.replication_timeout} s"
        elif status not in (200, 201, 202) or error_name(data):
            failure = f"POST /_replicate answered {status}: {text}"
        if failure is None and count < s.docs:
            failure = f"the replication answered but the target holds {count:,} of {s.docs:,} docs"
        if failure:
            self.add("replication", name, "docs/s", None, status="failed", peak_kb=peak,
                     note=f"{failure}; the target held {count:,} of {s.docs:,} docs after "
                          f"{time.perf_counter() - began:.0f} s",
                     details={"status": status, "answer": text, "target_doc_count": count})
            return
        finished = max(answer["at"], done_at) if status == 202 else answer["at"]
        seconds = finished - began
        self.add("replication", name, "docs/s", s.docs / seconds, self.values.get("bulk_rate"),
                 "Couchette _bulk_docs rate (this run)", "≥ 0.8× _bulk_docs (issue 17)",
                 s.docs / seconds >= 0.8 * self.values["bulk_rate"] if self.values.get("bulk_rate") else None, peak,
                 details={"seconds": seconds, "status": status, "target_peak_rss_kb": target_peak,
                          "answer": text})

    def startup(self, data_dir):
        s = self.settings
        if not (self.wanted("startup") or self.wanted("idle_rss")):
            return

        def start_once(make, probe_doc):
            began = time.perf_counter()
            process = make()   # returns once the banner is read
            ready = wait_until_up(process.port, 10)
            time.sleep(1)
            idle_kb = process.status_kb("VmRSS")
            peak_kb = process.status_kb("VmHWM")
            first_doc_ms = None
            if probe_doc:
                before = time.perf_counter()
                status, data = http_request(process.port, "GET", f"/{DB}/{ID_FORMAT % 0}")
                expect(status, data, (200,), "GET a document after restart")
                first_doc_ms = (time.perf_counter() - before) * 1000
            process.stop()
            return (ready - began) * 1000, idle_kb, first_doc_ms, peak_kb

        runs = [start_once(lambda: self.start_couchette("couchette-restart", data_dir), True)
                for _ in range(s.startup_runs)]
        reference_runs = [start_once(lambda: self.start_mhd(1024), False) for _ in range(s.startup_runs)]
        startup_ms = statistics.median(run[0] for run in runs)
        reference_ms = statistics.median(run[0] for run in reference_runs)
        idle_kb = statistics.median(run[1] for run in runs)
        reference_idle_kb = statistics.median(run[1] for run in reference_runs)
        first_doc_ms = statistics.median(run[2] for run in runs)
        peak_kb = max(run[3] or 0 for run in runs)
        if self.wanted("startup"):
            self.add("startup", f"Startup to first GET / 200, {s.docs:,}-doc data dir", "ms", startup_ms,
                     reference_ms, "libmicrohttpd fixed-body server startup", "< 200 ms", startup_ms < 200, peak_kb,
                     note=f"then first GET of a document (opens the database): {first_doc_ms:.1f} ms",
                     details={"runs_ms": [run[0] for run in runs], "first_doc_get_ms": first_doc_ms,
                              "reference_runs_ms": [run[0] for run in reference_runs]})
        if self.wanted("idle_rss"):
            self.add("idle_rss", "Idle RSS after start (1 s idle)", "MB", kb_to_mb(idle_kb),
                     kb_to_mb(reference_idle_kb), "libmicrohttpd fixed-body server", "< 25 MB (issue 17)",
                     kb_to_mb(idle_kb) < 25, peak_kb, details={"runs_kb": [run[1] for run in runs]})


# ----------------------------------------------------------------------------- output

def percentile(values, p):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))
    return ordered[index]


def error_name(data):
    try:
        return json.loads(data).get("error", "")
    except (ValueError, AttributeError):
        return ""


def kb_to_mb(kb):
    return None if kb is None else kb / 1024


def format_value(value, unit):
    if value is None:
        return "—"
    if unit in ("ms", "MB") and abs(value) < 1:
        return f"{value:.2f} {unit}"
    if unit in ("ms", "MB"):
        return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
    return f"{value:,.0f} {unit}"


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as meminfo:
            memory_kb = int(meminfo.readline().split()[1])
    except OSError:
        memory_kb = 0
    return {"cores": os.cpu_count(), "memory_gib": round(memory_kb / 1024 / 1024, 1), "cpu": model}


def table(rows, header):
    columns = ["Workload", "Couchette", "Reference (same run)", "Ratio", "Target", "Met?", "Peak RSS"]
    lines = []
    for row in rows:
        if row["status"] != "ok":
            couchette, reference, ratio, met = row["status"], "—", "—", "—"
        else:
            couchette = format_value(row["couchette"], row["unit"])
            reference = format_value(row["reference"], row["unit"])
            if row["reference_name"]:
                reference += f" ({row['reference_name']})"
            ratio = "—" if row["ratio"] is None else f"{row['ratio']:.2f}×"
            met = {True: "yes", False: "NO", None: "—"}[row["met"]]
        peak = "—" if row["peak_rss_kb"] is None else f"{row['peak_rss_kb'] / 1024:.1f} MB"
        lines.append([row["name"], couchette, reference, ratio, row["target"] or "—", met, peak])
    widths = [max(len(str(line[i])) for line in lines + [columns]) for i in range(len(columns))]
    out = [header, ""]
    out.append(" | ".join(c.ljust(w) for c, w in zip(columns, widths)))
    out.append("-|-".join("-" * w for w in widths))
    for line in lines:
        out.append(" | ".join(str(c).ljust(w) for c, w in zip(line, widths)))
    notes = [f"  {row['name']}: {row['note']}" for row in rows if row["note"]]
    if notes:
        out += ["", "Notes:"] + notes
    missed = [row["name"] for row in rows if row["met"] is False]
    out.append("")
    out.append("Targets missed: " + (", ".join(missed) if missed else "none"))
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--couchette", required=True, help="the couchette binary")
    parser.add_argument("--refs", required=True, help="directory with mhd_fixed and sqlite_ref")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--million", action="store_true",
                        help="1,000,000 documents: bulk load, replication, memory after it, view build, reduce queries and _find (issue 31)")
    parser.add_argument("--json", action="store_true", help="JSON lines on stdout, the table on stderr")
    parser.add_argument("--output", help="also write the JSON lines to this file")
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--only", type=lambda text: set(text.split(",")), default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args()
    unknown = (options.only or set()) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(sorted(unknown))}; known: {', '.join(WORKLOADS)}")

    def on_signal(number, _frame):
        raise SystemExit(128 + number)

    # SIGINT too: a shell without job control starts background commands with it ignored.
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        signal.signal(number, on_signal)
    bench = Bench(options)
    signal.alarm(bench.settings.deadline_seconds)
    began = time.monotonic()
    error = None
    try:
        bench.run()
    except BenchError as failure:
        error = str(failure)
    except KeyboardInterrupt:
        error = "interrupted"
    except SystemExit as exit_request:
        error = "stopped by signal" if exit_request.code != 128 + signal.SIGALRM else \
            f"deadline of {bench.settings.deadline_seconds} s reached"
    finally:
        signal.alarm(0)
        Process.stop_all()
        if options.keep:
            print(f"bench: kept {bench.workdir}", file=sys.stderr)
        else:
            shutil.rmtree(bench.workdir, ignore_errors=True)

    run = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "mode": bench.settings.mode, "docs": bench.settings.docs, "server_threads": options.threads,
           "machine": machine(), "seconds": round(time.monotonic() - began, 1)}
    lines = [json.dumps({**row, "run": run}, ensure_ascii=False) for row in bench.rows]
    if options.output:
        os.makedirs(os.path.dirname(os.path.abspath(options.output)), exist_ok=True)
        with open(options.output, "w") as output:
            output.write("\n".join(lines) + ("\n" if lines else ""))
    m = run["machine"]
    header = (f"Couchette benchmark, {run['mode']} mode, {run['date']}, {m['cores']} cores, "
              f"{m['memory_gib']} GiB, {m['cpu']}, {options.threads} server threads, {run['seconds']} s")
    text = table(bench.rows, header)
    if options.json:
        print(text, file=sys.stderr)
        for line in lines:
            print(line)
    else:
        print(text)
    if options.output:
        print(f"bench: JSON lines in {options.output}", file=sys.stderr)
    for name in Process.forced:
        print(f"bench: WARNING: {name} did not exit within 10 s of SIGTERM and was killed", file=sys.stderr)
    if error:
        print(f"bench: FAILED: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
