"""Views in scripts/bench: building a view over every document of the database, then reading
it whole with and without include_docs, each beside Couchette's _all_docs rate for the same
rows in the same run."""

import json
import time

MAP = "function(doc) { if (doc.type == 'bench') emit([doc.type, doc.index], doc.index); }"


def _timed(server, http_request, expect, path, what):
    began = time.perf_counter()
    status, data = http_request(server.port, "GET", path, timeout=1800)
    seconds = time.perf_counter() - began
    expect(status, data, (200,), what)
    return seconds, json.loads(data)


def views(bench, server, http_request, expect, db):
    """view_build: the first query of a new view (it maps every document); view_query and
    view_query_docs: the whole view read again, beside _all_docs read the same way."""
    s = bench.settings
    design = {"views": {"by_index": {"map": MAP}}}
    expect(*http_request(server.port, "PUT", f"/{db}/_design/bench-views", design), (201,), "PUT view ddoc")
    server.reset_peak()
    build_seconds, answer = _timed(server, http_request, expect, f"/{db}/_design/bench-views/_view/by_index?limit=1",
                                   "GET _view (build)")
    peak = server.status_kb("VmHWM")
    if answer.get("total_rows") != s.docs:
        raise RuntimeError(f"the view has {answer.get('total_rows')} rows, expected {s.docs}")
    list_seconds, listing = _timed(server, http_request, expect, f"/{db}/_all_docs", "GET _all_docs")
    listed = len(listing["rows"])
    bench.add("view_build", f"View build (JavaScript map), {s.docs:,} docs", "rows/s", s.docs / build_seconds,
              listed / list_seconds, "_all_docs rows/s, same run", "informational", None, peak,
              details={"seconds": build_seconds})

    for workload, include_docs in (("view_query", "false"), ("view_query_docs", "true")):
        timings, reference = [], []
        server.reset_peak()
        for _ in range(s.scan_runs):
            seconds, answer = _timed(server, http_request, expect,
                                     f"/{db}/_design/bench-views/_view/by_index?include_docs={include_docs}", "GET _view")
            if len(answer["rows"]) != s.docs:
                raise RuntimeError(f"the view answered {len(answer['rows'])} rows, expected {s.docs}")
            timings.append(seconds)
            seconds, listing = _timed(server, http_request, expect, f"/{db}/_all_docs?include_docs={include_docs}",
                                      "GET _all_docs")
            reference.append(len(listing["rows"]) / seconds)
        bench.add(workload, f"GET _view?include_docs={include_docs}, {s.docs:,} rows", "rows/s",
                  s.docs / min(timings), max(reference), f"_all_docs?include_docs={include_docs} rows/s, same run",
                  "informational", None, server.status_kb("VmHWM"), details={"seconds": timings})
