import CouchCore
import CurlClient
import Foundation
import Logging

/// A database behind a URL, spoken to over HTTP with CouchDB's replication protocol.
/// Each request is retried on connection failures, timeouts and 5xx/408/429 answers,
/// waiting 250 ms, then twice as long each time (`retries_per_request`, 5 by default),
/// before the failure reaches the replication. Connections are kept alive and shared
/// through the `HTTPClient`, which sets no limit per host: a job holds at most
/// `http_connections` requests at once (`ConnectionLimit`), its continuous feed aside.
public final class RemoteEndpoint: DatabaseEndpoint, @unchecked Sendable {
    public let peer: RemotePeer
    let client: HTTPClient
    let retries: Int
    /// A request that receives nothing for this long is abandoned (and retried): the job's
    /// `connection_timeout`; nil for the HTTP client's own limit.
    let inactivityTimeoutSeconds: Int?
    let logger: Logger
    let authenticator: PeerAuthenticator
    private let connections: ConnectionLimit
    private let lock = NSLock()
    private var bulkGetUnsupported = false
    private var failureObserver: (@Sendable (ReplicationError?) -> Void)?
    private var failing = false

    /// Told of each failed attempt as it happens, and (with nil) of the next success, so a job
    /// shows `offline`/`crashing` and its last error while a request is still being retried.
    public func observeFailures(_ observer: @escaping @Sendable (ReplicationError?) -> Void) {
        lock.withLock { failureObserver = observer }
    }

    func reportAttempt(_ failure: ReplicationError?) {
        let observer: (@Sendable (ReplicationError?) -> Void)? = lock.withLock {
            guard failure != nil || failing else { return nil }
            failing = failure != nil
            return failureObserver
        }
        observer?(failure)
    }

    public init(peer: RemotePeer, client: HTTPClient, retries: Int = 5, inactivityTimeoutSeconds: Int? = nil,
                connections: Int = 20, logger: Logger = Logger(label: "couchette.replication")) {
        self.peer = peer
        self.connections = ConnectionLimit(connections)
        self.client = client
        self.retries = retries
        self.inactivityTimeoutSeconds = inactivityTimeoutSeconds
        self.logger = logger
        authenticator = PeerAuthenticator(peer: peer, client: client, logger: logger)
    }

    public var displayName: String { peer.displayURL }

    // MARK: - Requests

    /// Sends a request to `<database URL><path>?<query>`, retrying as described above.
    /// Any answer that is not retried is returned, whatever its status.
    func send(_ method: String, _ path: String = "", query: [(String, String)] = [], body: [UInt8]? = nil,
              upload: UploadBody? = nil, contentType: String = "application/json", accept: String = "application/json",
              retryable: Bool = true) async throws(ReplicationError) -> HTTPClient.Response {
        let client = self.client
        return try await connections.withPlace { () async throws(ReplicationError) -> HTTPClient.Response in
            try await exchange(method, path, query: query, body: body, upload: upload, contentType: contentType,
                               accept: accept, retryable: retryable) { request throws(HTTPClientError) in
                let response = try await client.send(request)
                return (response, response)
            }
        }
    }

    /// As `send`, but returns once the response head has arrived; the body is then read in
    /// chunks from the stream. Retried until then as `send` is.
    func stream(_ method: String, _ path: String = "", query: [(String, String)] = [],
                accept: String = "application/json",
                headers extraHeaders: [(name: String, value: String)] = []) async throws(ReplicationError) -> StreamingResponse {
        let client = self.client
        return try await exchange(method, path, query: query, body: nil, upload: nil, contentType: "",
                                  accept: accept, extraHeaders: extraHeaders, retryable: true) { request throws(HTTPClientError) in
            let response = try await client.stream(request, framing: .chunks)
            return (HTTPClient.Response(status: response.status, headers: response.headers, body: []), response)
        }
    }

    /// The retry loop of `send` and `stream`: `attempt` makes one request and gives its head
    /// (status and headers) with what the caller gets.
    private func exchange<Answer>(
        _ method: String, _ path: String, query: [(String, String)], body: [UInt8]?, upload: UploadBody?,
        contentType: String, accept: String, extraHeaders: [(name: String, value: String)] = [], retryable: Bool,
        attempt: (HTTPClient.Request) async throws(HTTPClientError) -> (head: HTTPClient.Response, answer: Answer)
    ) async throws(ReplicationError) -> Answer {
        let url = peer.databaseURL + path + (query.isEmpty ? "" : "?" + URLEncoding.query(query))
        let shownURL = peer.displayURL + path
        var backoff = Backoff.request
        var retriedAuthentication = false
        while true {
            if Task.isCancelled { throw ReplicationError(.stopped, "stopped") }
            let authentication: [(name: String, value: String)]
            let epoch: Int
            do {
                (authentication, epoch) = try await authenticator.headers(method: method, url: url)
            } catch where error.isTransient {
                reportAttempt(error)
                // The login failed (a 5xx, a dropped connection): nothing was sent yet, so any
                // request may wait and try again, as for any other request's failure.
                guard backoff.failures < retries else { throw error }
                let wait = backoff.next()
                logger.notice("Retrying the login to \(peer.displayURL) in \(Double(wait) / 1000) seconds due to error \(error.reason)")
                try await ChangesReader.sleep(milliseconds: wait)
                continue
            }
            var headers: [(name: String, value: String)] = [("Accept", accept)]
            if body != nil || upload != nil { headers.append(("Content-Type", contentType)) }
            headers += peer.headers.map { ($0.name, $0.value) }
            headers += extraHeaders
            headers += authentication
            let failure: ReplicationError
            do {
                var request = HTTPClient.Request(method: method, url: url, headers: headers, body: body, upload: upload, tls: peer.tls)
                request.inactivityTimeoutSeconds = inactivityTimeoutSeconds
                // Who asks for an encoding wants the bytes as encoded (an attachment's digest is of those).
                request.keepsContentEncoding = extraHeaders.contains { $0.name.lowercased() == "accept-encoding" }
                let (response, answer) = try await attempt(request)
                // 501 is a peer's refusal, not a failure: it will answer the same again.
                if (response.status >= 500 && response.status != 501) || response.status == 408 || response.status == 429 {
                    failure = ReplicationError(.requestFailed, "\(method) \(shownURL) failed with status \(response.status)")
                } else {
                    if authenticator.shouldRetry(after: response, epoch: epoch), !retriedAuthentication {
                        retriedAuthentication = true
                        continue
                    }
                    reportAttempt(nil)
                    return answer
                }
            } catch .cancelled {
                throw ReplicationError(.stopped, "stopped")
            } catch .cannotConnect(let message) {
                failure = ReplicationError(.peerUnreachable, "\(method) \(shownURL) failed: \(message)")
            } catch .tls(let message) {
                // A certificate that cannot be trusted will not become trustworthy by retrying.
                throw ReplicationError(.forbidden, "\(method) \(shownURL) failed: TLS: \(message)")
            } catch {
                failure = ReplicationError(.requestFailed, "\(method) \(shownURL) failed: \(error)")
            }
            reportAttempt(failure)
            guard retryable, backoff.failures < retries else { throw failure }
            let wait = backoff.next()
            logger.notice("Retrying \(method) request to \(shownURL) in \(Double(wait) / 1000) seconds due to error \(failure.reason)")
            try await ChangesReader.sleep(milliseconds: wait)
        }
    }

    /// The response body as JSON.
    static func json(_ response: HTTPClient.Response) -> JSONValue? {
        try? JSONValue.parse(response.body)
    }

    static func errorDetail(_ response: HTTPClient.Response) -> String {
        guard let json = json(response) else { return "status \(response.status)" }
        let error = json["error"]?.stringValue ?? "status \(response.status)"
        return json["reason"]?.stringValue.map { "\(error): \($0)" } ?? error
    }

    /// The error for an answer the caller cannot use. A refusal (4xx, 501) is the peer's
    /// final word on what the job asks, so it fails the job at once with the peer's reason;
    /// anything else (an unreadable answer, a cut body) may pass on a retry.
    func unexpected(_ response: HTTPClient.Response, _ what: String) -> ReplicationError {
        let reason = "\(what) on \(displayName) failed: \(Self.errorDetail(response))"
        switch response.status {
        case 401: return ReplicationError(.unauthorized, "unauthorized to access or create database \(displayName)")
        case 403: return ReplicationError(.forbidden, "forbidden to access database \(displayName)")
        case 404 where Self.json(response)?["reason"]?.stringValue == "Database does not exist.":
            return ReplicationError(.databaseNotFound, "could not open \(displayName)")
        case 404: return ReplicationError(.notFound, reason)
        case 501: return ReplicationError(.notImplemented, reason)
        case 400..<500 where response.status != 408 && response.status != 429:
            return ReplicationError.named(Self.json(response)?["error"]?.stringValue ?? "bad_request", reason)
        default: return ReplicationError(.requestFailed, reason)
        }
    }

    // MARK: - Database

    public func open(create: Bool, createParameters: JSONObject) async throws(ReplicationError) -> EndpointInfo {
        if create {
            let query = createParameters.map { ($0.key, ReplicationFilter.parameterText($0.value)) }
            let response = try await send("PUT", query: query)
            if response.status == 401 {
                throw ReplicationError(.unauthorized, "unauthorized to access or create database \(displayName)")
            }
            if response.status == 403 {
                throw ReplicationError(.forbidden, "forbidden to create database \(displayName)")
            }
        }
        let response = try await send("GET")
        switch response.status {
        case 200:
            guard let info = Self.json(response), let sequence = info["update_seq"] else {
                throw ReplicationError(.databaseNotFound, "could not open \(displayName)")
            }
            return EndpointInfo(updateSequence: SourceSequence(sequence),
                                instanceStartTime: Self.instanceStartTime(info["instance_start_time"]))
        case 401:
            throw ReplicationError(.unauthorized, "unauthorized to access or create database \(displayName)")
        case 403:
            throw ReplicationError(.forbidden, "forbidden to access database \(displayName)")
        default:
            throw ReplicationError(.databaseNotFound, "could not open \(displayName)")
        }
    }

    public func info() async throws(ReplicationError) -> EndpointInfo {
        let response = try await send("GET")
        guard response.status == 200, let info = Self.json(response), let sequence = info["update_seq"] else {
            throw unexpected(response, "GET")
        }
        return EndpointInfo(updateSequence: SourceSequence(sequence),
                            instanceStartTime: Self.instanceStartTime(info["instance_start_time"]))
    }

    static func instanceStartTime(_ value: JSONValue?) -> String? {
        guard let value, !value.isNull else { return nil }
        return value.stringValue ?? value.serializedString()
    }

    public func pendingChanges(since sequence: SourceSequence) async throws(ReplicationError) -> Int? {
        // As CouchDB: numeric sequences by difference with update_seq, others via `pending`.
        if case .number(let number) = sequence.json, let since = number.intValue {
            let info = try await info()
            guard case .number(let current) = info.updateSequence.json, let updateSequence = current.intValue else { return nil }
            return max(0, updateSequence - since)
        }
        let response = try await send("GET", "_changes", query: [("since", sequence.queryValue), ("limit", "0")])
        guard response.status == 200 else { return nil }
        return Self.json(response)?["pending"]?.intValue
    }

    public func filterFunctionSource(designDocument: DocumentID, name: String) async throws(ReplicationError) -> String {
        let response = try await send("GET", URLEncoding.documentPath(designDocument))
        guard response.status == 200, let document = Self.json(response) else {
            throw ReplicationError(.filterFetchError, "Couldn't open document `\(designDocument.rawValue)` from source database `\(displayName)`: \(Self.errorDetail(response))")
        }
        guard let source = document["filters"]?[name]?.stringValue else {
            throw ReplicationError(.filterFetchError, "Couldn't find filter `\(name)` in document `\(designDocument.rawValue)` of source database `\(displayName)`")
        }
        return source
    }

    public func localDocument(_ id: DocumentID) async throws(ReplicationError) -> JSONObject? {
        let response = try await send("GET", URLEncoding.documentPath(id))
        switch response.status {
        case 200: return Self.json(response)?.objectValue
        case 404: return nil
        default: throw unexpected(response, "GET \(id.rawValue)")
        }
    }

    public func putLocalDocument(_ id: DocumentID, _ body: JSONObject) async throws(ReplicationError) -> String {
        let response = try await send("PUT", URLEncoding.documentPath(id), body: JSONValue.object(body).serialized())
        switch response.status {
        case 200, 201, 202:
            guard let revision = Self.json(response)?["rev"]?.stringValue else {
                throw ReplicationError(.checkpointCommitFailure, "no revision in the answer from \(displayName)")
            }
            return revision
        case 409:
            throw ReplicationError(.checkpointCommitFailure, "conflict")
        default:
            throw ReplicationError(.checkpointCommitFailure, Self.errorDetail(response))
        }
    }

    public func ensureFullCommit() async throws(ReplicationError) -> String? {
        let response = try await send("POST", "_ensure_full_commit", body: [])
        // CouchDB insists on 201; Couchbase Lite answers 200.
        guard response.status == 201 || response.status == 200 else {
            throw ReplicationError(.checkpointCommitFailure, Self.errorDetail(response))
        }
        return Self.instanceStartTime(Self.json(response)?["instance_start_time"])
    }

    // MARK: - Replication

    public func changes(_ request: ChangesRequest) async throws(ReplicationError) -> any ChangeStream {
        try await RemoteChangeStream.open(self, request)
    }

    public func revisionsDifference(_ revisions: [(DocumentID, [RevisionID])]) async throws(ReplicationError) -> [MissingRevisions] {
        var request = JSONObject()
        for (id, list) in revisions { request[id.rawValue] = .array(list.map { JSONValue($0.description) }) }
        let response = try await send("POST", "_revs_diff", body: JSONValue.object(request).serialized())
        guard response.status == 200, let answer = Self.json(response)?.objectValue else {
            throw unexpected(response, "POST _revs_diff")
        }
        return answer.compactMap { id, entry in
            let missing = entry["missing"]?.arrayValue?.compactMap { $0.stringValue.flatMap(RevisionID.init) } ?? []
            guard !missing.isEmpty else { return nil }
            let ancestors = entry["possible_ancestors"]?.arrayValue?.compactMap { $0.stringValue.flatMap(RevisionID.init) } ?? []
            return MissingRevisions(id: DocumentID(id), missing: missing, possibleAncestors: ancestors)
        }
    }

    public func bulkGet(_ requests: [RevisionRequest]) async throws(ReplicationError) -> [FetchResult] {
        let unsupported = lock.withLock { bulkGetUnsupported }
        if unsupported { throw ReplicationError(.notImplemented, "no _bulk_get") }
        let docs: [JSONValue] = requests.map { request in
            var entry: JSONObject = ["id": JSONValue(request.id.rawValue), "rev": JSONValue(request.revision.description)]
            if !request.attachmentsSince.isEmpty {
                entry["atts_since"] = .array(request.attachmentsSince.map { JSONValue($0.description) })
            }
            return .object(entry)
        }
        let body: JSONValue = ["docs": .array(docs), "latest": true, "revs": true, "attachments": false]
        // `att_encoding_info`: a stub kept as it is (attachments on demand) must say how its body is stored.
        let response = try await send("POST", "_bulk_get", query: [("latest", "true"), ("revs", "true"), ("attachments", "false"),
                                                                  ("att_encoding_info", "true")],
                                      body: body.serialized())
        let answer = response.status == 200 ? BulkGetAnswer.results(response.body) : nil
        if response.status == 200, answer == nil {
            // An answer that cannot be read: each document is fetched on its own instead.
            return requests.map { .failed($0.id, $0.revision, "unreadable _bulk_get answer") }
        }
        guard response.status == 200, let answer else {
            if ((400..<500).contains(response.status) || response.status == 501) && response.status != 401 && response.status != 403 {
                lock.withLock { bulkGetUnsupported = true }
                logger.info("\(displayName) answered _bulk_get with \(response.status); fetching with open_revs instead")
                throw ReplicationError(.notImplemented, "no _bulk_get")
            }
            throw unexpected(response, "POST _bulk_get")
        }
        return answer
    }

    public func openRevisions(_ id: DocumentID, _ revisions: [RevisionID]) async throws(ReplicationError) -> [FetchResult] {
        let list = JSONValue.array(revisions.map { JSONValue($0.description) }).serializedString()
        let response = try await send("GET", URLEncoding.documentPath(id),
                                      query: [("revs", "true"), ("open_revs", list), ("latest", "true"),
                                              ("att_encoding_info", "true")])
        switch response.status {
        case 200:
            guard let entries = Self.json(response)?.arrayValue else {
                // This document's answer cannot be read (too deep, malformed): it fails, the job goes on.
                return revisions.map { .failed(id, $0, "unreadable open_revs answer for \(id.rawValue)") }
            }
            return entries.compactMap { entry in
                if let document = entry["ok"]?.objectValue, let revision = ReplicatedRevision(document: document) {
                    return .found(revision)
                }
                if let missing = entry["missing"]?.stringValue.flatMap(RevisionID.init) { return .missing(id, missing) }
                return nil
            }
        case 414 where revisions.count > 1:
            // The URL is too long for the peer: ask for half the revisions at a time.
            let half = revisions.count / 2
            return try await openRevisions(id, Array(revisions[..<half])) + openRevisions(id, Array(revisions[half...]))
        case 404:
            return revisions.map { .missing(id, $0) }
        case 400..<500 where response.status != 401 && response.status != 403:
            // A refusal of this one document (its URL too long, ...): counted, not retried forever.
            let detail = Self.errorDetail(response)
            return revisions.map { .failed(id, $0, "GET \(id.rawValue) failed: \(detail)") }
        default:
            throw unexpected(response, "GET \(id.rawValue)")
        }
    }

    public func writeRevisions(_ revisions: [ReplicatedRevision]) async throws(ReplicationError) -> [WriteFailure] {
        var body: [UInt8] = Array(#"{"new_edits":false,"docs":["#.utf8)
        // Sized once: grown by doubling, a batch's megabytes were copied and faulted in twice.
        body.reserveCapacity(revisions.reduce(body.count + 2) { $0 + $1.encodedSize + 1 })
        for (index, revision) in revisions.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            revision.writeJSON(to: &body)
        }
        body.append(contentsOf: "]}".utf8)
        let response = try await send("POST", "_bulk_docs", body: body)
        switch response.status {
        case 201, 202, 417:
            let byID = Dictionary(revisions.map { ($0.id, $0.revision) }, uniquingKeysWith: { first, _ in first })
            return (Self.json(response)?.arrayValue ?? []).compactMap { entry in
                guard let error = entry["error"]?.stringValue, let id = entry["id"]?.stringValue else { return nil }
                let revision = entry["rev"]?.stringValue.flatMap(RevisionID.init) ?? byID[DocumentID(id)]
                return WriteFailure(id: DocumentID(id), revision: revision, error: error,
                                    reason: entry["reason"]?.stringValue ?? "")
            }
        case 413, 414:
            throw ReplicationError(.requestBodyTooLarge, "the target refused a request of \(body.count) bytes (\(response.status))")
        case 415:
            return revisions.map { WriteFailure(id: $0.id, revision: $0.revision, error: "bad_content_type",
                                                reason: Self.errorDetail(response)) }
        case 401:
            throw ReplicationError(.unauthorized, "unauthorized to write to database \(displayName)")
        case 403:
            throw ReplicationError(.forbidden, "forbidden to write to database \(displayName)")
        default:
            throw unexpected(response, "POST _bulk_docs")
        }
    }
}
