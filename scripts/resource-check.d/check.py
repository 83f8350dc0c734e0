"""Drives a real couchette through many databases; see scripts/resource-check."""
import argparse, http.client, json, os, shutil, signal, socket, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("--binary", required=True)
parser.add_argument("--cycles", type=int, default=3)
parser.add_argument("--databases", type=int, default=600)
parser.add_argument("--open", type=int, default=5000)
options = parser.parse_args()


class Server:
    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="couchette-resources-")
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.process = subprocess.Popen(
            [options.binary, "serve", "--data-dir", self.directory, "--port", str(self.port), "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.call("GET", "/_up")
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("couchette did not start")

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body)
        self.connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        response.read()
        if response.status >= 400:
            raise SystemExit(f"{method} {path}: {response.status}")
        return response.status

    def rss_kb(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    def descriptors(self):
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        shutil.rmtree(self.directory, ignore_errors=True)


failed = False
server = Server()
try:
    documents = {"docs": [{"_id": f"d{n}", "v": "x" * 200} for n in range(20)]}
    time.sleep(1)
    start = server.rss_kb()
    print(f"RSS at start: {start / 1024:.1f} MB")
    for cycle in range(options.cycles):
        began = time.time()
        for index in range(options.databases):
            server.call("PUT", f"/cycle{index}")
            server.call("POST", f"/cycle{index}/_bulk_docs", documents)
            server.call("GET", f"/cycle{index}/_all_docs?include_docs=true")
        for index in range(options.databases):
            server.call("DELETE", f"/cycle{index}")
        time.sleep(2)
        rss = server.rss_kb()
        ratio = rss / start
        print(f"cycle {cycle + 1}: {options.databases} databases in {time.time() - began:.0f} s, "
              f"RSS {rss / 1024:.1f} MB ({ratio:.2f}x start)")
        failed |= ratio > 1.2

    before = server.descriptors()
    peak = before
    began = time.time()
    for index in range(options.open):
        server.call("PUT", f"/open{index}")
        server.call("PUT", f"/open{index}/doc", {})
        if index % 25 == 0:
            peak = max(peak, server.descriptors())
    peak = max(peak, server.descriptors())
    print(f"{options.open} databases opened in turn in {time.time() - began:.0f} s: "
          f"descriptors {before} at start, peak {peak} (max_dbs_open 500)")
    failed |= peak - before > 500 * 8
finally:
    server.stop()
sys.exit(1 if failed else 0)
