"""Mango in scripts/bench: building a JSON index over the loaded database, _find on an
indexed equality (queries/s) and a range of 1,000 rows beside _all_docs reading the same
rows in the same run, and a $text query on a text index."""

import http.client
import json
import random
import time


def _post(connection, path, body):
    connection.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


def mango_find(bench, server, expect, db):
    s = bench.settings
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    status, data = _post(connection, f"/{db}/_index",
                         {"index": {"fields": ["index"]}, "name": "by-index", "ddoc": "bench-mango"})
    expect(status, data, (200,), "POST _index")

    # The first query builds the index from every document.
    def build():
        began = time.perf_counter()
        status, data = _post(connection, f"/{db}/_find", {"selector": {"index": 0}})
        expect(status, data, (200,), "first _find (index build)")
        return time.perf_counter() - began
    seconds, peak, _ = bench.measure(server, build)
    bench.add("mango_find", f"JSON index build, {s.docs:,} docs", "rows/s", s.docs / seconds,
              target="informational", peak_kb=peak, note="the first _find after POST _index")

    # Indexed equality, one client, keep-alive, for about two seconds.
    rng = random.Random(7)
    queries = 0
    began = time.perf_counter()
    while time.perf_counter() - began < 2:
        k = rng.randrange(s.docs)
        status, data = _post(connection, f"/{db}/_find", {"selector": {"index": k}})
        expect(status, data, (200,), "_find equality")
        if len(json.loads(data)["docs"]) != 1:
            raise RuntimeError(f"_find index={k} did not return exactly one document")
        queries += 1
    rate = queries / (time.perf_counter() - began)
    bench.add("mango_find", f"_find indexed equality, {s.docs:,} docs, 1 client", "queries/s", rate,
              target="informational")

    # A range of 1,000 rows through the index, beside _all_docs?include_docs=true for the same rows.
    start = s.docs // 2
    timings, references = [], []
    for _ in range(s.scan_runs):
        began = time.perf_counter()
        status, data = _post(connection, f"/{db}/_find",
                             {"selector": {"index": {"$gte": start, "$lt": start + 1000}}, "limit": 1000})
        timings.append(time.perf_counter() - began)
        expect(status, data, (200,), "_find range")
        if len(json.loads(data)["docs"]) != 1000:
            raise RuntimeError("_find range did not return 1,000 documents")
        began = time.perf_counter()
        connection.request("GET", f"/{db}/_all_docs?include_docs=true&limit=1000&startkey=%22bench-{start:07d}%22")
        response = connection.getresponse()
        body = response.read()
        references.append(time.perf_counter() - began)
        expect(response.status, body, (200,), "_all_docs range")
    bench.add("mango_find", "_find range of 1,000 rows (JSON index)", "rows/s", 1000 / min(timings),
              1000 / min(references), "_all_docs?include_docs=true, the same 1,000 rows", "informational",
              details={"seconds": timings, "reference_seconds": references})

    # Full text: a text index on the title, then $text queries.
    status, data = _post(connection, f"/{db}/_index",
                         {"index": {"fields": [{"name": "title", "type": "string"}]}, "type": "text",
                          "name": "titles", "ddoc": "bench-text"})
    if status == 200:
        began = time.perf_counter()
        status, data = _post(connection, f"/{db}/_find", {"selector": {"$text": "document 17"}, "limit": 10})
        build = time.perf_counter() - began
        expect(status, data, (200,), "first $text _find (text index build)")
        bench.add("mango_find", f"Text index build (FTS5), {s.docs:,} docs", "rows/s", s.docs / build,
                  target="informational")
        queries = 0
        began = time.perf_counter()
        while time.perf_counter() - began < 2:
            status, data = _post(connection, f"/{db}/_find",
                                 {"selector": {"$text": str(rng.randrange(s.docs))}, "limit": 10})
            expect(status, data, (200,), "$text _find")
            queries += 1
        bench.add("mango_find", "_find $text (one term), limit 10", "queries/s",
                  queries / (time.perf_counter() - began), target="informational")
    connection.close()
