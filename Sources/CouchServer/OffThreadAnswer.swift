import CouchCore

/// A request answered on a pool thread instead of the libmicrohttpd worker that read it.
/// Each worker serves many connections: while a handler runs, every other connection of its
/// worker waits. Most answers take microseconds; these may take minutes (a view or Mango
/// index built on its first query, a JavaScript function that loops), so their connection
/// is suspended and the worker goes on serving the others.
///
/// They queue per database (`FairQueue`): one database's flood of slow requests takes at
/// most half the threads, so another database's requests still find one.
final class OffThreadAnswer: DeferredResponse, @unchecked Sendable {
    private let queue: FairQueue
    private let owner: String
    private let answer: @Sendable () -> HTTPResponse
    private let answered: (@Sendable () -> Void)?

    /// `owner`: whose share of the threads the request takes; by default the database its
    /// path names. `answered` runs once the answer is delivered, or the request dropped because
    /// its client left while it queued.
    init(queue: FairQueue, path: String, owner: String? = nil, answered: (@Sendable () -> Void)? = nil,
         answer: @escaping @Sendable () -> HTTPResponse) {
        self.queue = queue
        // The database's name as the path spells it.
        self.owner = owner
            ?? String(path.utf8.split(separator: UInt8(ascii: "/"), maxSplits: 1).first.map { Substring($0) } ?? "")
        self.answered = answered
        self.answer = answer
    }

    /// The answer runs with `cancellation` as its thread's current one, so the work inside
    /// (functions, scans) stops when the client hangs up.
    func start(cancellation: RequestCancellation, deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        queue.submit(owner: owner) { [answer, answered] in
            defer { answered?() }
            // Its client left while it queued: nobody would read the answer.
            if cancellation.isCancelled { return deliver(.error(CouchError.clientGone)) }
            deliver(RequestCancellation.withCurrent(cancellation) { answer() })
        }
    }

    /// Whether a request's path names a route that runs design functions or builds an index
    /// (writes into a database with validation functions are the server's to recognise):
    /// `_view`, `_show`, `_list`, `_update`, `_rewrite` and `_search` of a design document,
    /// `_find` (and their partitioned forms), or reads as many documents as its body names
    /// (`_bulk_get`, `_revs_diff`, `_missing_revs`). Decided from the path alone, before the
    /// request is parsed, so that the other requests pay for a few byte comparisons only.
    static func mayRunLong(path: String) -> Bool {
        if let answer = path.utf8.withContiguousStorageIfAvailable(namesLongRoute) { return answer }
        return Array(path.utf8).withUnsafeBufferPointer(namesLongRoute)
    }

    /// `mayRunLong(path:)`, and listings whose `POST` body may name millions of keys
    /// (`_all_docs`, `_design_docs`, and their `/queries`); their `GET`s stream as they are read.
    static func mayRunLong(method: String, path: String) -> Bool {
        if mayRunLong(path: path) { return true }
        guard method == "POST" else { return false }
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), maxSplits: 3)
        guard segments.count == 2 || segments.count == 3 else { return false }
        return keyedListings.contains { segments[1].elementsEqual($0) }
            && (segments.count == 2 || segments[2].elementsEqual("queries".utf8))
    }

    /// The database a request may write documents into, running its validation functions:
    /// `PUT`, `POST`, `DELETE` and `COPY` of `/db`, `/db/doc[/attachment]` and
    /// `/db/_bulk_docs` (design documents are not theirs to judge, as in CouchDB). Whether the
    /// database has such functions is the server's to ask.
    static func writtenDatabase(method: String, path: String) -> DatabaseName? {
        guard method == "PUT" || method == "POST" || method == "DELETE" || method == "COPY" else { return nil }
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), maxSplits: 2)
        guard let first = segments.first,
              let name = PercentDecoding.decode(Substring(first), plusIsSpace: false) else { return nil }
        if segments.count > 1 {
            let second = segments[1]
            if second.first == UInt8(ascii: "_"), !second.elementsEqual("_bulk_docs".utf8) { return nil }
        }
        return try? DatabaseName(name)
    }

    /// A `_changes` request whose filter runs client code (a filter function, `_selector`,
    /// `_view`): its first rows, which may answer the filter's error with a status, are
    /// produced off the listener too (the feed produces the rest there itself).
    static func filtersChanges(_ request: HTTPRequest) -> Bool {
        guard let filter = request.queryValue("filter"), filter != "_doc_ids", filter != "_design" else { return false }
        return request.path.utf8.split(separator: UInt8(ascii: "/")).last?.elementsEqual("_changes".utf8) == true
    }

    private static let designFunctions = ["_view", "_show", "_list", "_update", "_rewrite", "_search"].map { Array($0.utf8) }
    private static let find = Array("_find".utf8)
    private static let bodyListings = ["_bulk_get", "_revs_diff", "_missing_revs"].map { Array($0.utf8) }
    private static let keyedListings = ["_all_docs", "_design_docs"].map { Array($0.utf8) }
    private static let design = Array("_design".utf8)

    /// Segments are compared raw: a percent-encoded name (`_design%2Fddoc`) is simply not
    /// recognised, and its request is answered on the worker as every other one is.
    private static func namesLongRoute(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        // Most requests (`/db/doc`) name no underscored resource at all.
        guard bytes.contains(UInt8(ascii: "_")) else { return false }
        // Seven segments at most (`/db/_partition/p/_design/ddoc/_view/...`), the last one the rest.
        let segments = bytes.split(separator: UInt8(ascii: "/"), maxSplits: 6)
        guard segments.count >= 2 else { return false }
        // `/db/_partition/p/...` asks what `/db/...` would.
        var rest = segments.dropFirst()
        if rest.first.map({ $0.elementsEqual("_partition".utf8) }) == true { rest = rest.dropFirst(2) }
        guard let first = rest.first else { return false }
        if first.elementsEqual(find) || bodyListings.contains(where: { first.elementsEqual($0) }) { return rest.count == 1 }
        guard first.elementsEqual(design), rest.count >= 3 else { return false }
        let resource = rest[rest.startIndex + 2]
        return designFunctions.contains { resource.elementsEqual($0) }
    }
}
