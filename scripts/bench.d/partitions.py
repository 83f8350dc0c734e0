"""Partitioned databases in scripts/bench: a query over one small partition beside the same
query over the whole database, where another partition holds nearly every document. A
partition query reads only its partition's rows (an ID or index key range), so its time
should follow the partition's size, not the database's."""

import http.client
import json
import time


def _request(connection, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    connection.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=headers)
    response = connection.getresponse()
    return response.status, response.read()


def partition_query(bench, server, expect):
    s = bench.settings
    db = "bench-parts"
    small = 1000
    big = max(s.docs - small, small)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    status, data = _request(connection, "PUT", f"/{db}?partitioned=true")
    expect(status, data, (201, 202), "PUT partitioned database")
    for partition, count in (("small", small), ("big", big)):
        for start in range(0, count, 1000):
            docs = [{"_id": f"{partition}:{i:07d}", "n": i, "kind": "reading"} for i in range(start, min(start + 1000, count))]
            status, data = _request(connection, "POST", f"/{db}/_bulk_docs", {"docs": docs})
            expect(status, data, (201, 202), "load partitioned database")

    selector = {"selector": {"n": {"$gte": 0}, "kind": "reading"}, "limit": small, "execution_stats": True}
    timings, references = [], []
    examined = whole_examined = None
    for _ in range(s.scan_runs):
        began = time.perf_counter()
        status, data = _request(connection, "POST", f"/{db}/_partition/small/_find", selector)
        timings.append(time.perf_counter() - began)
        expect(status, data, (200,), "partition _find")
        answer = json.loads(data)
        if len(answer["docs"]) != small:
            raise RuntimeError("partition _find did not return the partition's documents")
        examined = answer["execution_stats"]["total_docs_examined"]
        # The same documents from the whole database: the selector names the partition's IDs.
        whole = dict(selector, selector={"$and": [{"_id": {"$regex": "^small:"}}, {"n": {"$gte": 0}}, {"kind": "reading"}]})
        began = time.perf_counter()
        status, data = _request(connection, "POST", f"/{db}/_find", whole)
        references.append(time.perf_counter() - began)
        expect(status, data, (200,), "whole-database _find")
        answer = json.loads(data)
        if len(answer["docs"]) != small:
            raise RuntimeError("whole-database _find did not return the partition's documents")
        whole_examined = answer["execution_stats"]["total_docs_examined"]
    bench.add("partition_query", f"_partition/small/_find, {small:,} of {small + big:,} docs", "rows/s",
              small / min(timings), small / min(references),
              f"the same {small:,} documents by _find over the whole database", "informational",
              note=f"documents examined: {examined:,} (partition) vs {whole_examined:,} (whole database)",
              details={"seconds": timings, "reference_seconds": references,
                       "docs_examined": examined, "reference_docs_examined": whole_examined})

    # The partition's rows of a view beside the whole view's (each at most `limit` rows).
    ddoc = {"views": {"by_n": {"map": "function(doc) { emit(doc.n, null); }"}}}
    expect(*_request(connection, "PUT", f"/{db}/_design/parts", ddoc), (201, 202), "PUT partitioned design document")
    ddoc = {"options": {"partitioned": False}, "views": {"by_n": {"map": "function(doc) { emit(doc.n, null); }"}}}
    expect(*_request(connection, "PUT", f"/{db}/_design/global", ddoc), (201, 202), "PUT global design document")
    for path in (f"/{db}/_partition/small/_design/parts/_view/by_n?limit=1", f"/{db}/_design/global/_view/by_n?limit=1"):
        expect(*_request(connection, "GET", path), (200,), "view index build")
    timings, references = [], []
    for _ in range(s.scan_runs):
        began = time.perf_counter()
        status, data = _request(connection, "GET", f"/{db}/_partition/small/_design/parts/_view/by_n?limit={small}")
        timings.append(time.perf_counter() - began)
        expect(status, data, (200,), "partition view")
        began = time.perf_counter()
        status, data = _request(connection, "GET", f"/{db}/_design/global/_view/by_n?limit={small}")
        references.append(time.perf_counter() - began)
        expect(status, data, (200,), "whole-database view")
    bench.add("partition_query", f"_partition/small view rows, {small:,} of {small + big:,}", "rows/s",
              small / min(timings), small / min(references), f"{small:,} rows of the global view", "informational",
              details={"seconds": timings, "reference_seconds": references})
