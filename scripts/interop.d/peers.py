"""The two servers an interop scenario runs between: Couchette (the binary built here) and
Apache CouchDB 3.4.3 (a release built beforehand, found through COUCHDB_RELEASE), started
on loopback ports in a temporary directory and stopped when the run ends.

CouchDB's release is started, never built: building fetched sources is deliberately not
part of this repository (see docs/interop.md). Each CouchDB node runs from its own copy of
the release, with its own Erlang port mapper (ERL_EPMD_PORT), so node names never clash
with other Erlang nodes on the machine and the mapper can be stopped with the nodes.
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from client import Client

RELEASE_VERSION = "3.4.3"
ADMIN = ("admin", "admin")
# pbkdf2-sha256 of "admin" (salt b2d41eefe2eac487b4ad4f85b32e16de, 600,000 iterations): a
# cluster's nodes must share the same hash, or a cookie from one is refused by another.
ADMIN_HASH = ("-pbkdf2:sha256-697b1b326332e4b6740ef82b65f497eca42befa96de755ef3b89a7ad7de17218,"
              "b2d41eefe2eac487b4ad4f85b32e16de,600000")
BANNER = re.compile(rb"listening on http://[^:/]+:(\d+)/")

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    """In the child before exec: SIGKILL if the runner dies, so no server outlives it."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class PeerError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_release():
    """(path, None) for a usable CouchDB release, else (None, why not)."""
    candidates = []
    if os.environ.get("COUCHDB_RELEASE"):
        candidates.append(("COUCHDB_RELEASE", os.environ["COUCHDB_RELEASE"]))
    candidates.append(("default", os.path.expanduser(f"~/.cache/couchette/couchdb-{RELEASE_VERSION}")))
    reasons = []
    for origin, path in candidates:
        if os.access(os.path.join(path, "bin", "couchdb"), os.X_OK):
            return os.path.realpath(path), None
        reasons.append(f"{origin} {path} has no executable bin/couchdb")
        if origin == "COUCHDB_RELEASE":
            break  # an explicit choice that fails is not replaced by the default
    return None, "; ".join(reasons)


def wait_up(client, what, process, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PeerError(f"{what} exited with status {process.returncode} while starting")
        try:
            if client.request("GET", "/_up", expect=None)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise PeerError(f"{what} did not answer /_up within {timeout} s")


class Couchette:
    """`couchette serve` on a fixed loopback port (kept across restarts, so replications
    that name it reach it again), data in its own directory."""

    def __init__(self, binary, workdir, name="couchette"):
        self.binary = binary
        self.name = name
        self.data_dir = os.path.join(workdir, name + "-data")
        self.log_path = os.path.join(workdir, name + ".log")
        self.port = free_port()
        self.process = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = Client(self.url)

    def start(self):
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [self.binary, "serve", "--port", str(self.port), "--bind", "127.0.0.1", "--data-dir", self.data_dir,
             "--log-level", "notice"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=_die_with_parent)
        log.close()
        wait_up(self.client, self.name, self.process)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def restart(self):
        self.stop()
        self.start()

    def version(self):
        """Its own version, and the commit checked out here (the binary is assumed built from it)."""
        own = self.client.get("/").get("vendor", {}).get("version", "?")
        described = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                                   cwd=os.path.dirname(os.path.abspath(__file__)), check=False).stdout.strip()
        return f"{own} ({described or 'no git'})"

    def log_tail(self, lines=30):
        return _tail(self.log_path, lines)


class CouchDBNode:
    def __init__(self, release, workdir, index, epmd_port, cluster):
        self.name = f"node{index}@127.0.0.1"
        self.directory = os.path.join(workdir, f"couchdb-node{index}")
        self.log_path = self.directory + ".log"
        self.port = free_port()
        self.epmd_port = epmd_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = Client(self.url, ADMIN)
        self.process = None
        shutil.copytree(release, self.directory, symlinks=True)
        settings = [
            "[couchdb]", "uuid = 0123456789abcdef0123456789abcdef" if cluster else "single_node = true", "",
            "[cluster]", "q = 8" if cluster else "q = 2", "n = 3" if cluster else "n = 1", "",
            "[chttpd]", "bind_address = 127.0.0.1", f"port = {self.port}", "",
            "[chttpd_auth]", "secret = couchette-interop-secret-0123456789", "",
            "[admins]", f"admin = {ADMIN_HASH}", "",
            # Jobs start at once (not after up to 5 s of random delay).
            "[replicator]", "startup_jitter = 0", "",
            "[log]", "level = notice", "",
        ]
        with open(os.path.join(self.directory, "etc", "local.d", "interop.ini"), "w") as ini:
            ini.write("\n".join(settings) + "\n")
        vm_args = os.path.join(self.directory, "etc", "vm.args")
        with open(vm_args) as f:
            text = f.read()
        text = re.sub(r"(?m)^-name .*$", f"-name {self.name}", text)
        text = re.sub(r"(?m)^# -setcookie$", "-setcookie couchette-interop-cookie", text)
        with open(vm_args, "w") as f:
            f.write(text)

    def start(self):
        log = open(self.log_path, "ab")
        environment = dict(os.environ, ERL_EPMD_PORT=str(self.epmd_port))
        self.process = subprocess.Popen([os.path.join(self.directory, "bin", "couchdb")], env=environment,
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        preexec_fn=_die_with_parent)
        log.close()

    def wait_up(self):
        wait_up(self.client, self.name, self.process)

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None


class CouchDB:
    """A single node (q=2, n=1) or a three-node cluster (q=8, n=3). `url` and `client`
    are the first node's; every node answers for the whole cluster."""

    def __init__(self, release, workdir, cluster=False):
        self.cluster = cluster
        self.kind = "cluster" if cluster else "single"
        self.release = release
        self.epmd_port = free_port()
        base = os.path.join(workdir, self.kind)
        os.makedirs(base, exist_ok=True)
        self.nodes = [CouchDBNode(release, base, index, self.epmd_port, cluster)
                      for index in range(1, 4 if cluster else 2)]
        self.url = self.nodes[0].url
        self.client = self.nodes[0].client
        self.joined = False

    def authenticated_url(self):
        return self.url.replace("http://", f"http://{ADMIN[0]}:{ADMIN[1]}@")

    def start(self):
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_up()
        if self.cluster and not self.joined:
            for node in self.nodes[1:]:
                self.client.put(f"/_node/_local/_nodes/{node.name}", {})
            self.client.post("/_cluster_setup", {"action": "finish_cluster"})
            self.joined = True
        self.wait_system_databases()

    def wait_system_databases(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, _ = self.client.request("GET", "/_replicator", expect=None)
            if status == 200:
                return
            time.sleep(0.2)
        raise PeerError("CouchDB's _replicator database did not appear")

    def stop(self):
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop()

    def restart(self):
        self.stop()
        self.start()

    def stop_epmd(self):
        """The port mapper the first node started (on our own port); it outlives the nodes."""
        environment = dict(os.environ, ERL_EPMD_PORT=str(self.epmd_port))
        epmd = next((os.path.join(root, "epmd") for root, _, files in os.walk(self.nodes[0].directory)
                     if "epmd" in files and root.endswith("bin") and "erts-" in root), None)
        if epmd:
            subprocess.run([epmd, "-kill"], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=10, check=False)

    def version(self):
        return self.client.get("/")["version"]

    def log_tail(self, lines=30):
        return "\n".join(f"--- {node.name}\n" + _tail(node.log_path, lines) for node in self.nodes)


def _tail(path, lines):
    try:
        with open(path, "rb") as log:
            return b"".join(log.readlines()[-lines:]).decode(errors="replace")
    except OSError:
        return ""
