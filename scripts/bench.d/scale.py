"""Scale benchmarks (issue 31); see scripts/bench-scale.

Three workloads on real couchette processes on loopback:
- jobs: N continuous _replicator jobs on server A, each pulling its own database of server B over
  HTTP; time until all run, latency of a new document reaching every target, A's threads and RSS.
- rotation: M one-shot _replicator documents with max_jobs K; time until all completed.
- databases: D databases created, each written and read; RSS and descriptors after, and once idle.
"""
import argparse, http.client, json, os, shutil, signal, socket, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

parser = argparse.ArgumentParser()
parser.add_argument("--binary", required=True)
parser.add_argument("--jobs", type=int, default=1000)
parser.add_argument("--rotation", type=int, default=10000)
parser.add_argument("--max-jobs", type=int, default=500)
parser.add_argument("--databases", type=int, default=10000)
parser.add_argument("--only", default="jobs,rotation,databases")
options = parser.parse_args()


class Server:
    def __init__(self, name, extra=()):
        self.directory = tempfile.mkdtemp(prefix=f"couchette-scale-{name}-")
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.process = subprocess.Popen(
            [options.binary, "serve", "--data-dir", self.directory, "--port", str(self.port),
             "--log-level", "error", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            try:
                self.call("GET", "/_up")
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit(f"{name} did not start")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None, timeout=120):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()

    def status(self, field):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
        return 0

    def descriptors(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def parallel(function, items, workers=16):
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


def wait_until(condition, timeout, step=0.2):
    began = time.time()
    while time.time() - began < timeout:
        if condition():
            return time.time() - began
        time.sleep(step)
    return None


def report(name, value, unit, goal, met):
    print(f"{name:<44} {value:>12} {unit:<8} goal {goal:<12} {'met' if met else 'NOT MET'}", flush=True)


def jobs():
    a, b = Server("a"), Server("b")
    try:
        count = options.jobs
        # All of them at once: CouchDB's default max_jobs (500) would rotate the rest.
        a.call("PUT", "/_node/_local/_config/replicator/max_jobs", str(max(500, count)))
        parallel(lambda i: b.call("PUT", f"/source{i}"), range(count))
        parallel(lambda i: a.call("PUT", f"/target{i}"), range(count))
        began = time.time()
        parallel(lambda i: a.call("PUT", f"/_replicator/job{i}", {
            "source": f"{b.url}/source{i}", "target": f"target{i}", "continuous": True}), range(count))

        def all_running():
            docs = a.call("GET", f"/_scheduler/docs?limit={count + 10}")[1].get("docs", [])
            return len(docs) == count and all(doc.get("state") == "running" for doc in docs)
        running = wait_until(all_running, 600, step=1)
        report(f"{count} continuous jobs to one peer: all running", f"{time.time() - began:.1f}" if running else "never",
               "s", "", running is not None)
        time.sleep(5)

        def delivery(i):
            b.call("PUT", f"/source{i}/probe", {"n": i})
            return wait_until(lambda: a.call("GET", f"/target{i}/probe")[0] == 200, 60, step=0.02)
        latencies = [value for value in parallel(delivery, range(count)) if value is not None]
        worst = max(latencies) if latencies else None
        if latencies:
            ordered = sorted(latencies)
            report("  a new document reaches its target (median)", f"{ordered[len(ordered) // 2]:.2f}", "s", "", True)
            report("  a new document reaches its target (p99)", f"{ordered[len(ordered) * 99 // 100]:.2f}", "s", "", True)
        report("  a new document reaches its target (worst)", f"{worst:.2f}" if worst else "never", "s", "< 1 s",
               worst is not None and worst < 1 and len(latencies) == count)
        threads, rss = a.status("Threads"), a.status("VmRSS") / 1024
        report("  threads of the replicating server", threads, "", "< 64", threads < 64)
        report("  its resident memory", f"{rss:.0f}", "MB", "< 300 MB", rss < 300)
        # Once the jobs wait: connections unused for 10 s close at the next of the 10-s passes,
        # so within 20 s.
        time.sleep(25)
        settled = a.status("VmRSS") / 1024
        report("  its resident memory once the jobs wait", f"{settled:.0f}", "MB", "< 300 MB", settled < 300)
    finally:
        a.stop()
        b.stop()


def rotation():
    a = Server("rotation")
    try:
        count, maximum = options.rotation, options.max_jobs
        a.call("PUT", "/_node/_local/_config/replicator/max_jobs", str(maximum))
        a.call("PUT", "/_node/_local/_config/replicator/interval", "5000")
        a.call("PUT", "/source")
        a.call("POST", "/source/_bulk_docs", {"docs": [{"_id": f"d{n}"} for n in range(10)]})
        began = time.time()
        parallel(lambda i: a.call("PUT", f"/_replicator/r{i}", {
            "source": "source", "target": f"copy{i}", "create_target": True}), range(count))

        def all_completed():
            docs = a.call("GET", f"/_scheduler/docs?limit={count + 10}")[1].get("docs", [])
            return len(docs) == count and all(doc.get("state") == "completed" for doc in docs)
        done = wait_until(all_completed, 3600, step=2)
        report(f"{count} _replicator documents, max_jobs {maximum}: all completed",
               f"{time.time() - began:.0f}" if done else "never", "s", "", done is not None)
    finally:
        a.stop()


def databases():
    a = Server("databases")
    try:
        count = options.databases
        start_rss, start_fds = a.status("VmRSS") / 1024, a.descriptors()
        began = time.time()

        def use(i):
            a.call("PUT", f"/db{i}")
            a.call("PUT", f"/db{i}/doc", {"n": i})
            return a.call("GET", f"/db{i}/doc")[0]
        statuses = parallel(use, range(count))
        elapsed = time.time() - began
        report(f"{count} databases created, written and read", f"{elapsed:.0f}", "s", "",
               all(status == 200 for status in statuses))
        busy_fds = a.descriptors()
        time.sleep(25)  # connections unused for 10 s close at the next 10-s pass: within 20 s
        idle_fds, rss = a.descriptors(), a.status("VmRSS") / 1024
        report("  descriptors, busy then idle", f"{busy_fds}/{idle_fds}", "", f"<= 2/open db",
               idle_fds - start_fds <= 2 * 500)
        report("  resident memory", f"{rss:.0f}", "MB", f"(start {start_rss:.0f})", True)
    finally:
        a.stop()


for workload in options.only.split(","):
    {"jobs": jobs, "rotation": rotation, "databases": databases}[workload]()
