"""Paging through a large database, as PouchDB and CouchDB's documentation page (issue 31's
scale): `_changes?limit=100` from one page's `last_seq` to the next, `_all_docs?limit=100` and a
view's rows from one page's last row on (`startkey`, `startkey_docid`, `skip=1`). Each page
answers a `pending` or an `offset`, counts SQLite keeps in no B-tree node; a page must cost
about the same wherever it lies in the database. And a view read after each write, whose
`total_rows` the write changes."""
import statistics
import json
import time
import urllib.parse

PAGES = 30
PAGE_ROWS = 100


def _pages(server, http_request, expect, first_path, next_path, pages):
    """The first page's seconds (nothing is remembered for it yet: a client starting there counts
    afresh), then seconds per page over the `pages` pages after it."""
    def page(path):
        status, data = http_request(server.port, "GET", path, timeout=600)
        expect(status, data, (200,), "GET " + path)
        return next_path(json.loads(data))
    began = time.perf_counter()
    path = page(first_path)
    first = time.perf_counter() - began
    began = time.perf_counter()
    for _ in range(pages):
        path = page(path)
    return first, (time.perf_counter() - began) / pages


def paging(bench, server, http_request, expect, db, id_format):
    s = bench.settings
    deep = int(s.docs * 0.8)   # 31 pages of 100 rows still ahead at 20,000 documents
    quote = urllib.parse.quote

    def after_change(answer):
        return f"/{db}/_changes?limit={PAGE_ROWS}&since={quote(json.dumps(answer['last_seq']))}"

    def after_row(base, by_id=True):
        def next_path(answer):
            last = answer["rows"][-1]
            within_key = f"&startkey_docid={quote(last['id'])}" if by_id else ""
            return f"{base}&startkey={quote(json.dumps(last['key']))}{within_key}&skip=1"
        return next_path

    design = {"views": {"by_hundred": {"map": "function(doc) { emit(doc.index % 100, null); }"}}}
    expect(*http_request(server.port, "PUT", f"/{db}/_design/bench-paging", design), (201,), "PUT paging ddoc")
    view = f"/{db}/_design/bench-paging/_view/by_hundred?limit={PAGE_ROWS}"
    expect(*http_request(server.port, "GET", f"/{db}/_design/bench-paging/_view/by_hundred?limit=1", timeout=3600),
           (200,), "GET paging view (build)")   # built before it is timed
    listings = [
        ("_changes?limit=100, from a page's last_seq", "pending",
         f"/{db}/_changes?limit={PAGE_ROWS}&since=0", f"/{db}/_changes?limit={PAGE_ROWS}&since={deep}",
         after_change),
        ("_all_docs?limit=100, startkey and skip=1", "offset",
         f"/{db}/_all_docs?limit={PAGE_ROWS}",
         f"/{db}/_all_docs?limit={PAGE_ROWS}&startkey={quote(json.dumps(id_format % deep))}",
         after_row(f"/{db}/_all_docs?limit={PAGE_ROWS}", by_id=False)),
        ("a view, limit=100, startkey, startkey_docid and skip=1", "offset",
         view, view + "&startkey=80", after_row(view)),
    ]
    for name, count, first, deep_path, next_path in listings:
        shallow_first, shallow = _pages(server, http_request, expect, first, next_path, PAGES)
        deep_first, deeper = _pages(server, http_request, expect, deep_path, next_path, PAGES)
        slow, fast = max(deeper, shallow), min(deeper, shallow)
        bench.add("paging", f"{name}, 30 pages at the start and 30 at 80% of {s.docs:,} docs, the slower",
                  "ms/page", slow * 1000, fast * 1000, "the faster of the two",
                  "≤ 2×: a page's cost independent of where it lies (issue 31)", slow <= 2 * fast,
                  note=f"{shallow * 1000:.2f} ms/page at the start, {deeper * 1000:.2f} at 80%, each page answering "
                       f"its {count}; the page each run starts with counts it afresh: {shallow_first * 1000:.1f} ms "
                       f"at the start, {deep_first * 1000:.1f} ms at 80%",
                  details={"deep_ms": deeper * 1000, "first_pages_ms": shallow * 1000,
                           "deep_start_ms": deep_first * 1000, "start_ms": shallow_first * 1000})

    # A view read after each write (its `total_rows` changed) beside the same read without one.
    rounds = 15
    read = f"/{db}/_design/bench-paging/_view/by_hundred?limit=10"

    def timed_read():
        began = time.perf_counter()
        status, data = http_request(server.port, "GET", read, timeout=600)
        expect(status, data, (200,), "GET " + read)
        return time.perf_counter() - began

    after_write, unchanged = [], []
    for index in range(rounds):
        status, data = http_request(server.port, "PUT", f"/{db}/bench-paging-{index}", {"index": index})
        expect(status, data, (201,), "PUT a document between view reads")
        after_write.append(timed_read())
        unchanged.append(timed_read())
    slow, fast = statistics.median(after_write), statistics.median(unchanged)
    bench.add("paging", f"A view read (limit=10) after each write, {s.docs:,} docs", "ms", slow * 1000, fast * 1000,
              "the same read with no write before it (median)", "≤ 3×: no count of the whole view (issue 31)",
              slow <= 3 * fast, note=f"median of {rounds}; the read after a write indexes that document too",
              details={"after_write_ms": [t * 1000 for t in after_write], "unchanged_ms": [t * 1000 for t in unchanged]})
