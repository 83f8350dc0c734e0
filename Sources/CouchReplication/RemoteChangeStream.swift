import CouchCore
import CurlClient
import Foundation

/// A remote source's `_changes`, requested as CouchDB's replicator requests it and read
/// line by line as it arrives:
///
/// - `feed=normal` (one-shot) or `feed=continuous`, `style=all_docs` (or `main_only` for
///   `winning_revs_only`), `since=<JSON sequence>`, then `timeout=10000` for a normal feed
///   and `heartbeat=` a third of `connection_timeout` (10000 at most) for a continuous one
///   (CouchDB sends `timeout` for both; a heartbeat keeps proxies from closing a quiet feed
///   and lets a dead peer be noticed: a feed silent for `connection_timeout` is abandoned);
/// - `doc_ids` and `selector` as `POST ?filter=_doc_ids|_selector` with the list or the
///   selector in the body (falling back to an unfiltered GET filtered here when the peer
///   answers 405, as CouchDB does);
/// - a named filter as `filter=ddoc/name` first, then the `query_params`, in CouchDB's order.
///
/// Rows are read one per line (CouchDB and Couchette write them so); a body that does not
/// come in lines is parsed whole at its end.
final class RemoteChangeStream: ChangeStream, @unchecked Sendable {
    private let response: StreamingResponse
    private let continuous: Bool
    private let localFilter: Set<String>?
    private let lock = NSLock()
    private var reportedCaughtUp = false
    private var pending: [ChangeEvent] = []
    private var unparsed: [UInt8] = []
    private var sawRows = false
    private var sawLastSequence = false
    private var ended = false

    private init(response: StreamingResponse, continuous: Bool, localFilter: Set<String>?) {
        self.response = response
        self.continuous = continuous
        self.localFilter = localFilter
    }

    /// The query parameters of a `_changes` request, in the order CouchDB's replicator sends them.
    static func query(_ request: ChangesRequest, filtered: Bool = true) -> [(String, String)] {
        var base: [(String, String)] = [
            ("feed", request.continuous ? "continuous" : "normal"),
            ("style", request.allLeaves ? "all_docs" : "main_only"),
            ("since", request.since.queryValue),
        ]
        base.append(request.continuous ? ("heartbeat", String(request.heartbeatMilliseconds))
                                       : ("timeout", String(request.timeoutMilliseconds)))
        guard filtered, let filter = request.filter else { return base }
        switch filter {
        case .documentIDs: return [("filter", "_doc_ids")] + base
        case .selector: return [("filter", "_selector")] + base
        case .named(let name, let parameters):
            var query = base
            for (key, value) in parameters where !query.contains(where: { $0.0 == key }) {
                query.insert((key, ReplicationFilter.parameterText(value)), at: 0)
            }
            return [("filter", name)] + query
        }
    }

    static func open(_ endpoint: RemoteEndpoint, _ request: ChangesRequest) async throws(ReplicationError) -> RemoteChangeStream {
        var method = "GET"
        var body: [UInt8]?
        switch request.filter {
        case .documentIDs(let ids)?:
            method = "POST"
            body = JSONValue.object(["doc_ids": .array(ids.map { JSONValue($0) })]).serialized()
        case .selector(let selector)?:
            method = "POST"
            body = JSONValue.object(["selector": selector]).serialized()
        default:
            break
        }
        do {
            let response = try await stream(endpoint, method, query(request), body)
            return RemoteChangeStream(response: response, continuous: request.continuous, localFilter: nil)
        } catch where error.kind == .badRequest && method == "POST" {
            // CouchDB < 1.1 refuses POST _changes: read everything, keep the listed documents.
            guard case .documentIDs(let ids)? = request.filter else { throw error }
            let response = try await stream(endpoint, "GET", query(request, filtered: false), nil)
            return RemoteChangeStream(response: response, continuous: request.continuous, localFilter: Set(ids))
        }
    }

    /// Opens the streaming request, retrying as `RemoteEndpoint.send` does until the head arrives.
    private static func stream(_ endpoint: RemoteEndpoint, _ method: String, _ query: [(String, String)],
                               _ body: [UInt8]?) async throws(ReplicationError) -> StreamingResponse {
        let url = endpoint.peer.databaseURL + "_changes?" + URLEncoding.query(query)
        let shownURL = endpoint.displayName + "_changes"
        var backoff = Backoff.request
        var retriedAuthentication = false
        while true {
            let failure: ReplicationError
            var headers: [(name: String, value: String)] = [("Accept", "application/json")]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            headers += endpoint.peer.headers.map { ($0.name, $0.value) }
            let (authentication, epoch) = try await endpoint.authenticator.headers(method: method, url: url)
            headers += authentication
            let response: StreamingResponse
            do {
                var request = HTTPClient.Request(method: method, url: url, headers: headers, body: body, tls: endpoint.peer.tls)
                request.inactivityTimeoutSeconds = endpoint.inactivityTimeoutSeconds
                response = try await endpoint.client.stream(request)
            } catch {
                switch error {
                case .cancelled: throw ReplicationError(.stopped, "stopped")
                case .cannotConnect(let message):
                    failure = ReplicationError(.peerUnreachable, "\(method) \(shownURL) failed: \(message)")
                default:
                    failure = ReplicationError(.requestFailed, "\(method) \(shownURL) failed: \(error)")
                }
                endpoint.reportAttempt(failure)
                guard backoff.failures < endpoint.retries else { throw failure }
                try await ChangesReader.sleep(milliseconds: backoff.next())
                continue
            }
            switch response.status {
            case 200:
                endpoint.reportAttempt(nil)
                return response
            case 405 where method == "POST":
                response.cancel()
                throw ReplicationError(.badRequest, "POST _changes refused")
            case 401, 403:
                response.cancel()
                let head = HTTPClient.Response(status: response.status, headers: response.headers, body: [])
                if !retriedAuthentication && endpoint.authenticator.shouldRetry(after: head, epoch: epoch) {
                    retriedAuthentication = true
                    continue
                }
                throw ReplicationError(response.status == 401 ? .unauthorized : .forbidden,
                                       "unauthorized to read the changes of \(endpoint.displayName)")
            case 408, 429, 500, 502...:
                response.cancel()
                failure = ReplicationError(.requestFailed, "\(method) \(shownURL) failed with status \(response.status)")
            default:
                // A refusal (a filter the source cannot run, no such database, 501): final,
                // with the peer's reason.
                let body = (try? await response.readToEnd()) ?? []
                throw endpoint.unexpected(HTTPClient.Response(status: response.status, headers: response.headers, body: body),
                                          "\(method) _changes")
            }
            endpoint.reportAttempt(failure)
            guard backoff.failures < endpoint.retries else { throw failure }
            try await ChangesReader.sleep(milliseconds: backoff.next())
        }
    }

    func cancel() { response.cancel() }

    func next() async throws(ReplicationError) -> ChangeEvent? {
        while true {
            switch takePending() {
            case .event(let event): return event
            case .end: return nil
            case .none: break
            }

            let line: [UInt8]?
            do {
                switch try response.availableLine() {
                case .line(let available):
                    line = available
                case .end:
                    line = nil
                case .pending:
                    if continuous && !reportedCaughtUp {
                        reportedCaughtUp = true
                        return .caughtUp
                    }
                    line = try await response.nextLine()
                }
            } catch {
                switch error {
                case .cancelled: throw ReplicationError(.stopped, "stopped")
                case .cannotConnect(let message): throw ReplicationError(.peerUnreachable, "change feed failed: \(message)")
                default: throw ReplicationError(.requestFailed, "change feed failed: \(error)")
                }
            }
            guard let line else {
                try finishBody()
                continue
            }
            consume(line)
        }
    }

    private enum Taken {
        case event(ChangeEvent)
        case end
        case none
    }

    private func takePending() -> Taken {
        lock.withLock {
            if !pending.isEmpty { return .event(pending.removeFirst()) }
            return ended ? .end : .none
        }
    }

    /// One line of the body: a row, the closing `last_seq`, a heartbeat, or framing.
    private func consume(_ line: [UInt8]) {
        var bytes = line[...]
        while let first = bytes.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { bytes = bytes.dropFirst() }
        if bytes.isEmpty {
            if continuous && !reportedCaughtUp {
                reportedCaughtUp = true
                append(.caughtUp)
            }
            return
        }
        let prefix = Array(#"{"results":["#.utf8)
        if bytes.starts(with: prefix) { bytes = bytes.dropFirst(prefix.count) }
        while let last = bytes.last, last == UInt8(ascii: ",") || last == UInt8(ascii: " ") { bytes = bytes.dropLast() }
        if bytes.isEmpty || bytes.elementsEqual("]".utf8) { return }
        if bytes.first == UInt8(ascii: "\"") {
            // `"last_seq":...,"pending":0}` closing a normal feed.
            if let object = try? JSONValue.parse([UInt8(ascii: "{")] + Array(bytes)), let last = object["last_seq"] {
                sawLastSequence = true
                append(.lastSequence(SourceSequence(last)))
                return
            }
        }
        guard let object = try? JSONValue.parse(Array(bytes)), case .object(let members) = object else {
            unparsed.append(contentsOf: line)
            unparsed.append(UInt8(ascii: "\n"))
            return
        }
        if let change = Self.change(members) {
            sawRows = true
            reportedCaughtUp = false
            if let localFilter, !localFilter.contains(change.id.rawValue) { return }
            append(.change(change))
        } else if let last = members["last_seq"], members["results"] == nil {
            sawLastSequence = true
            append(.lastSequence(SourceSequence(last)))
        } else {
            unparsed.append(contentsOf: line)
            unparsed.append(UInt8(ascii: "\n"))
        }
    }

    /// The body ended: parse it whole if it did not come in lines.
    private func finishBody() throws(ReplicationError) {
        defer { lock.withLock { ended = true } }
        guard !sawRows && !sawLastSequence && !unparsed.isEmpty else { return }
        guard let body = try? JSONValue.parse(unparsed), let rows = body["results"]?.arrayValue else {
            throw ReplicationError(.requestFailed, "the change feed's answer is not CouchDB's")
        }
        for row in rows {
            if let members = row.objectValue, let change = Self.change(members),
               localFilter?.contains(change.id.rawValue) ?? true {
                append(.change(change))
            }
        }
        if let last = body["last_seq"] { append(.lastSequence(SourceSequence(last))) }
    }

    private func append(_ event: ChangeEvent) {
        lock.withLock { pending.append(event) }
    }

    static func change(_ row: JSONObject) -> Change? {
        guard let sequence = row["seq"], let id = row["id"]?.stringValue, let changes = row["changes"]?.arrayValue else {
            return nil
        }
        let revisions = changes.compactMap { $0["rev"]?.stringValue.flatMap(RevisionID.init) }
        return Change(sequence: SourceSequence(sequence), id: DocumentID(id), revisions: revisions,
                      isDeleted: row["deleted"]?.boolValue ?? false)
    }
}
