"""Feeds at scale: many continuous _changes feeds open on one server at once (issue 17's
target: 10,000 feeds in under 200 MB and under 64 threads, each receiving a change within one
second of its commit). Run on a server of its own, started with room for the connections."""
import os
import resource
import selectors
import socket
import statistics
import time

FEEDS = 10_000
TARGET_MB = 200
TARGET_THREADS = 64
TARGET_SECONDS = 1.0


def feeds_at_scale(bench, start_couchette, http_request, expect, kb_to_mb):
    """Opens FEEDS continuous feeds, commits one document, and measures its arrival at every
    feed (after the PUT's acknowledgement, which follows the commit), the server's RSS and
    threads with every feed open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FEEDS + 256
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    count = min(FEEDS, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 256)
    server = start_couchette("couchette-feeds", os.path.join(bench.workdir, "feeds"),
                             ["--max-connections", str(count + 128)])
    selector = selectors.DefaultSelector()
    sockets = []
    try:
        expect(*http_request(server.port, "PUT", "/feeds"), (201, 202), "PUT /feeds")
        request = (b"GET /feeds/_changes?feed=continuous&since=now&heartbeat=60000 HTTP/1.1\r\n"
                   b"Host: 127.0.0.1\r\n\r\n")
        received = {}
        opened_at = time.monotonic()
        for _ in range(count):
            client = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            client.sendall(request)
            client.setblocking(False)
            selector.register(client, selectors.EVENT_READ)
            sockets.append(client)
            received[client.fileno()] = b""

        def read_until(predicate, deadline):
            """Reads what the feeds send until predicate(data) holds for every one (or the deadline);
            returns the monotonic time each feed met it, by descriptor."""
            met = {fd: time.monotonic() for fd, data in received.items() if predicate(data)}
            while len(met) < len(received) and time.monotonic() < deadline:
                for key, _ in selector.select(timeout=0.2):
                    fd = key.fileobj.fileno()
                    try:
                        chunk = key.fileobj.recv(65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    received[fd] += chunk
                    if fd not in met and predicate(received[fd]):
                        met[fd] = time.monotonic()
            return met

        headed = read_until(lambda data: b"\r\n\r\n" in data, time.monotonic() + 120)
        open_seconds = time.monotonic() - opened_at
        if len(headed) < count:
            bench.add("feeds_at_scale", f"{count:,} continuous feeds", "feeds", len(headed), status="failed",
                      note=f"only {len(headed):,} of {count:,} feeds answered within 120 s")
            return
        time.sleep(1)
        rss_kb = server.status_kb("VmRSS")
        threads = server.status_kb("Threads")
        for fd in received:
            received[fd] = b""
        status, body = http_request(server.port, "PUT", "/feeds/the-change", b'{"v":1}')
        acknowledged = time.monotonic()
        expect(status, body, (201, 202), "PUT /feeds/the-change")
        arrived = read_until(lambda data: b'"the-change"' in data, acknowledged + 10)
        delays = sorted(max(0.0, arrived[fd] - acknowledged) for fd in arrived)
        within = sum(1 for delay in delays if delay <= TARGET_SECONDS)
        met = (within == count and kb_to_mb(rss_kb) < TARGET_MB and threads < TARGET_THREADS)
        bench.add("feeds_at_scale", f"{count:,} continuous feeds: a change reaches all", "ms",
                  delays[-1] * 1000 if len(delays) == count else None,
                  target=f"all < {TARGET_SECONDS * 1000:.0f} ms, < {TARGET_MB} MB, < {TARGET_THREADS} threads",
                  met=met, peak_kb=server.status_kb("VmHWM"),
                  status="ok" if len(delays) == count else "failed",
                  note=(f"{within:,} of {count:,} feeds within 1 s (median "
                        f"{statistics.median(delays) * 1000:.0f} ms); RSS {kb_to_mb(rss_kb):.1f} MB and "
                        f"{threads} threads with every feed open; opened in {open_seconds:.1f} s"
                        if delays else f"no feed received the change within 10 s"),
                  details={"feeds": count, "arrived": len(delays), "within_1s": within, "rss_kb": rss_kb,
                           "threads": threads, "open_seconds": open_seconds,
                           "median_ms": statistics.median(delays) * 1000 if delays else None,
                           "max_ms": delays[-1] * 1000 if delays else None})
    finally:
        for client in sockets:
            try:
                client.close()
            except OSError:
                pass
        selector.close()
        server.stop()
