"""Design-document functions in scripts/bench: named filters on a changes feed beside the
raw JavaScriptCore call rate for the same function (jsc_ref, same run), and _bulk_docs with
and without a validate_doc_update function."""

import http.client
import json
import os
import subprocess
import time

FILTER = "function(doc, req) { return doc.index % 2 == 0 && doc.type == req.query.type; }"
VALIDATION = ("function(newDoc, oldDoc, userCtx, secObj) { if (!newDoc.type) throw({forbidden: 'type required'}); "
              "if (oldDoc && oldDoc.type != newDoc.type) throw({forbidden: 'type is fixed'}); }")


def filter_changes(bench, server, http_request, expect, document, id_format, db):
    """GET db/_changes?filter=... over every document of db; filter calls/s is documents / s."""
    s = bench.settings
    design = {"filters": {"even": FILTER}}
    expect(*http_request(server.port, "PUT", f"/{db}/_design/bench-filters", design), (201,), "PUT filter ddoc")
    path = f"/{db}/_changes?filter=bench-filters/even&type=bench"
    timings = []
    rows = 0
    server.reset_peak()
    for _ in range(s.scan_runs):
        began = time.perf_counter()
        status, data = http_request(server.port, "GET", path, timeout=600)
        timings.append(time.perf_counter() - began)
        expect(status, data, (200,), "GET _changes?filter=")
        rows = len(json.loads(data)["results"])
    peak = server.status_kb("VmHWM")
    if rows != (s.docs + 1) // 2:
        raise RuntimeError(f"{path} passed {rows} rows, expected {(s.docs + 1) // 2}")
    calls = s.docs + 1   # every document and the design document itself
    rate = calls / min(timings)

    # The same function, the same documents (as the filter sees them), straight on JavaScriptCore.
    documents = os.path.join(bench.workdir, "filter-docs.jsonl")
    with open(documents, "w") as out:
        for index in range(s.docs):
            body = json.loads(document(index))
            body["_rev"] = "1-0123456789abcdef0123456789abcdef"
            out.write(json.dumps(body, separators=(",", ":")) + "\n")
    request = json.dumps({"query": {"filter": "bench-filters/even", "type": "bench"}, "method": "GET",
                          "userCtx": {"db": db, "name": None, "roles": ["_admin"]}, "headers": {}, "body": "undefined"})
    answer = subprocess.run([os.path.join(bench.options.refs, "jsc_ref"), FILTER, request, documents,
                             str(s.scan_runs)], capture_output=True, text=True, timeout=600)
    os.remove(documents)
    if answer.returncode != 0:
        raise RuntimeError(f"jsc_ref failed: {answer.stderr.strip()}")
    reference = json.loads(answer.stdout)
    bench.add("filter_changes", f"GET _changes?filter=ddoc/name (JavaScript), {s.docs:,} docs", "calls/s", rate,
              reference["calls_per_second"], "JavaScriptCore from C: parse + call, one context",
              "informational", None, peak,
              note=f"{rows:,} rows pass", details={"seconds": timings, "reference": reference})


def validated_bulk_docs(bench, server, http_request, expect, document):
    """POST _bulk_docs (1,000 a request) into a database without and with a validation function."""
    s = bench.settings
    batches = []
    for start in range(0, s.docs, 1000):
        docs = ",".join(document(i) for i in range(start, min(start + 1000, s.docs)))
        batches.append(('{"docs":[' + docs + "]}").encode())
    rates = {}
    peaks = {}
    for name in ("novalidation", "validation"):
        db = "bench-" + name
        expect(*http_request(server.port, "PUT", "/" + db), (201,), f"PUT /{db}")
        if name == "validation":
            expect(*http_request(server.port, "PUT", f"/{db}/_design/rules", {"validate_doc_update": VALIDATION}),
                   (201,), "PUT validation ddoc")
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)

        def load():
            began = time.perf_counter()
            for body in batches:
                connection.request("POST", f"/{db}/_bulk_docs", body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                data = response.read()
                expect(response.status, data, (201,), f"POST /{db}/_bulk_docs")
            return time.perf_counter() - began

        seconds, peaks[name], _ = bench.measure(server, load)
        connection.close()
        rates[name] = s.docs / seconds
    bench.add("validate_bulk_docs", f"POST _bulk_docs with validate_doc_update, {s.docs:,} docs", "docs/s",
              rates["validation"], rates["novalidation"], "the same without a validation function",
              "informational", None, peaks["validation"],
              note=f"{(1 / rates['validation'] - 1 / rates['novalidation']) * 1e6:.1f} µs added per document")
