"""The multi-tenant attack campaign; see scripts/tenant-campaign."""
import argparse, base64, http.client, json, os, random, shutil, signal, socket, statistics, subprocess
import sys, tempfile, threading, time

parser = argparse.ArgumentParser()
parser.add_argument("--binary", required=True)
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--memory-cap", type=int, default=2048)
options = parser.parse_args()

ADMIN = ("admin", "campaign-admin-pass")


def auth(user):
    return {"Authorization": "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()}


class MemoryCgroup:
    """A memory cgroup of its own under this process's (v1 or v2), or None."""

    @staticmethod
    def make(megabytes):
        if megabytes <= 0:
            return None
        try:
            lines = open("/proc/self/cgroup").read().splitlines()
        except OSError:
            return None
        name = f"couchette-campaign-{os.getpid()}"
        for line in lines:
            parts = line.split(":", 2)
            if parts[1] == "memory":
                path, limit = f"/sys/fs/cgroup/memory{parts[2].rstrip('/')}/{name}", "memory.limit_in_bytes"
                peak = "memory.max_usage_in_bytes"
                break
        else:
            own = next((line[3:] for line in lines if line.startswith("0::")), None)
            if own is None:
                return None
            path, limit, peak = f"/sys/fs/cgroup{own.rstrip('/')}/{name}", "memory.max", "memory.peak"
        try:
            os.mkdir(path)
            open(f"{path}/{limit}", "w").write(str(megabytes << 20))
        except OSError:
            return None
        group = MemoryCgroup()
        group.path, group.peak_file, group.limit = path, peak, megabytes
        return group

    def add(self, pid):
        open(f"{self.path}/cgroup.procs", "w").write(str(pid))

    def peak_mb(self):
        try:
            return int(open(f"{self.path}/{self.peak_file}").read()) / (1 << 20)
        except (OSError, ValueError):
            return 0.0

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


class Server:
    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="couchette-campaign-")
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        environment = dict(os.environ, COUCHETTE_ADMIN=f"{ADMIN[0]}:{ADMIN[1]}")
        self.process = subprocess.Popen(
            [options.binary, "serve", "--data-dir", self.directory, "--port", str(self.port), "--log-level", "error"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
        self.cgroup = MemoryCgroup.make(options.memory_cap)
        if self.cgroup:
            self.cgroup.add(self.process.pid)
        for _ in range(200):
            try:
                self.call("GET", "/_up")
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("couchette did not start")

    def call(self, method, path, body=None, user=ADMIN, timeout=120, raw=None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body))
            all_headers = {"Content-Type": "application/json", **(auth(user) if user else {}), **(headers or {})}
            connection.request(method, path, body=data, headers=all_headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def alive(self):
        return self.process.poll() is None

    def descriptors(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def rss_mb(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.cgroup:
            self.cgroup.remove()
        shutil.rmtree(self.directory, ignore_errors=True)


POISON = """function(doc, req) {
  globalThis.stolen = globalThis.stolen || [];
  var apply = Function.prototype.apply;
  Function.prototype.apply = function(self, args) { try { stolen.push(JSON.stringify(args)); } catch (e) {} return apply.call(this, self, args); };
  Object.prototype.x = "poisoned";
  __couchette.validateBatch = function(f, entries) { stolen.push(JSON.stringify(entries)); return entries.map(function() { return null; }); };
  __couchette.filterBatch = function(f, docs) { stolen.push(JSON.stringify(docs)); return docs.map(function() { return "1"; }).join(""); };
  return "poisoned";
}"""

ATTACKER_DESIGN = {"shows": {
    "poison": POISON,
    "loot": "function(doc, req) { return JSON.stringify(globalThis.stolen || []); }",
    "typed": "function(doc, req) { var a = new Uint8Array(1 << 30); a.fill(1); return String(a[1]); }",
    "split": "function(doc, req) { return String('x'.repeat(1 << 28).split('').join('').length); }",
    "loop": "function(doc, req) { while (true) {} }",
}, "filters": {"loop": "function(doc, req) { while (true) {} }"}}

VICTIM_DESIGN = {
    "validate_doc_update": "function(newDoc) { if (newDoc.forbidden) { throw({forbidden: 'not here'}); } }",
    "views": {"by_owner": {"map": "function(doc) { if (doc.owner) { emit(doc.owner, 1); } }", "reduce": "_count"}},
    "filters": {"mine": "function(doc, req) { return doc.owner == 'alice'; }"},
    "shows": {"probe": "function(doc, req) { return JSON.stringify({x: ({}).x}); }"},
}


def setup(server):
    for name, password in [("alice", "alice-pass"), ("mallory", "mallory-pass")]:
        server.call("PUT", f"/_users/org.couchdb.user:{name}",
                    {"name": name, "password": password, "roles": [], "type": "user"})
    for database, security in [("secret", {"admins": {"names": []}, "members": {"names": ["alice"]}}),
                               ("evil", {"admins": {"names": ["mallory"]}, "members": {"names": ["mallory"]}})]:
        server.call("PUT", f"/{database}")
        server.call("PUT", f"/{database}/_security", security)
    server.call("PUT", "/secret/_design/guard", VICTIM_DESIGN)
    server.call("PUT", "/evil/_design/poison", ATTACKER_DESIGN, user=("mallory", "mallory-pass"))
    server.call("POST", "/evil/_bulk_docs", {"docs": [{"_id": f"m{n}", "text": "a" * 38} for n in range(200)]},
                user=("mallory", "mallory-pass"))


def hang_up(server, request, wait=0.2):
    """Sends a raw request and closes at once (or after `wait`)."""
    try:
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        connection.sendall(request)
        time.sleep(wait)
        connection.close()
    except OSError:
        pass


def attacks(server, stop):
    mallory = ("mallory", "mallory-pass")
    credentials = base64.b64encode(b"mallory:mallory-pass").decode()

    def raw(method, path, body=b"", content_type="application/json"):
        return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {credentials}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    regex = json.dumps({"selector": {"text": {"$regex": "^(a|aa)+$"}}}).encode()
    slow_regex = json.dumps({"selector": {"text": {"$regex": "(a|a)*b"}}}).encode()
    bulk_get = json.dumps({"docs": [{"id": f"m{n % 200}"} for n in range(50000)]}).encode()
    boundary = "campaign"
    parts = [f"--{boundary}\r\nContent-Type: application/json\r\n\r\n".encode()
             + json.dumps({"_attachments": {f"a{n}": {"follows": True, "content_type": "text/plain", "length": 1}
                                            for n in range(3000)}}).encode()]
    parts += [f"\r\n--{boundary}\r\n\r\nx".encode() for _ in range(3000)]
    multipart = b"".join(parts) + f"\r\n--{boundary}--".encode()

    kinds = [
        lambda: server.call("GET", "/evil/_design/poison/_show/poison", user=mallory),
        lambda: server.call("GET", "/evil/_design/poison/_show/typed", user=mallory),
        lambda: server.call("GET", "/evil/_design/poison/_show/split", user=mallory),
        lambda: hang_up(server, raw("GET", "/evil/_design/poison/_show/loop"), wait=1),
        lambda: hang_up(server, raw("GET", "/evil/_changes?feed=continuous&filter=poison/loop"), wait=1),
        lambda: server.call("POST", "/evil/_find", raw=regex, user=mallory),
        lambda: hang_up(server, raw("POST", "/evil/_find", slow_regex), wait=0.5),
        lambda: hang_up(server, raw("POST", "/evil/_changes?feed=longpoll&filter=_selector", regex), wait=0.5),
        lambda: hang_up(server, raw("POST", "/evil/_bulk_get", bulk_get), wait=0.3),
        lambda: server.call("PUT", "/evil/many", raw=multipart, user=mallory,
                            headers={"Content-Type": f"multipart/related; boundary={boundary}"}),
        lambda: [hang_up(server, b"GET /_up HTTP/1.1\r\nHost: x\r\n\r\n", wait=0) for _ in range(200)],
    ]
    while not stop.is_set():
        try:
            random.choice(kinds)()
        except OSError:
            pass


def victim(server, latencies, failures, stop, count):
    alice = ("alice", "alice-pass")
    while not stop.is_set():
        count[0] += 1
        n = count[0]
        for method, path, body, expected in [
            ("PUT", f"/secret/doc{n}", {"owner": "alice", "secret": f"alice-secret-{n}"}, 201),
            ("PUT", f"/secret/bad{n}", {"owner": "alice", "forbidden": True}, 403),
            ("GET", "/secret/_design/guard/_view/by_owner", None, 200),
            ("GET", "/secret/_changes?filter=guard/mine&limit=5", None, 200),
            ("GET", "/secret/_design/guard/_show/probe", None, 200),
            ("POST", "/secret/_find", {"selector": {"owner": "alice"}, "limit": 5}, 200),
        ]:
            began = time.time()
            try:
                status, text = server.call(method, path, body, user=alice, timeout=60)
            except OSError as error:
                failures.append(f"{method} {path}: {error}")
                continue
            latencies.append(time.time() - began)
            if status != expected:
                failures.append(f"{method} {path}: {status} {text[:200]!r}")
            elif path.endswith("_show/probe") and b"poisoned" in text:
                failures.append("alice's show saw the poisoned prototype")


def main():
    server = Server()
    failed = False
    try:
        setup(server)
        print(f"server pid {server.process.pid}, memory cgroup: "
              f"{f'{server.cgroup.limit} MB' if server.cgroup else 'none (not allowed here)'}")
        time.sleep(1)
        start_descriptors = server.descriptors()
        for round_number in range(1, options.rounds + 1):
            stop = threading.Event()
            latencies, failures, count = [], [], [0]
            threads = [threading.Thread(target=attacks, args=(server, stop)) for _ in range(6)]
            threads.append(threading.Thread(target=victim, args=(server, latencies, failures, stop, count)))
            for thread in threads:
                thread.start()
            time.sleep(30)
            stop.set()
            for thread in threads:
                thread.join(timeout=180)
            status, loot = server.call("GET", "/evil/_design/poison/_show/loot", user=("mallory", "mallory-pass"))
            leaked = b"alice" in loot
            time.sleep(12)   # connections released, idle databases closed
            descriptors = server.descriptors() if server.alive() else -1
            ordered = sorted(latencies) or [0.0]
            print(f"round {round_number}: victim {len(latencies)} requests, median {statistics.median(ordered) * 1000:.0f} ms, "
                  f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1000:.0f} ms, worst {ordered[-1] * 1000:.0f} ms; "
                  f"server alive {server.alive()}, peak RSS {server.rss_mb():.0f} MB"
                  + (f", cgroup peak {server.cgroup.peak_mb():.0f} MB" if server.cgroup else "")
                  + f"; descriptors {start_descriptors} -> {descriptors}; leak {leaked}; "
                  f"victim failures {len(failures)}")
            for failure in failures[:5]:
                print("  ", failure)
            if not server.alive() or leaked or failures or descriptors > start_descriptors + 50:
                failed = True
    finally:
        server.stop()
    sys.exit(1 if failed else 0)


main()
