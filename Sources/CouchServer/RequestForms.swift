import CouchCore
import Synchronization

/// Request forms CouchDB 3 still accepts from clients that cannot speak plain REST, and
/// the per-answer decorations it adds: `X-HTTP-Method-Override`, JSONP, `X-Couch-Request-ID`.
enum RequestForms {
    /// `X-HTTP-Method-Override` on a `POST` (only there, as CouchDB) stands for the method it names.
    static func overridingMethod(_ request: HTTPRequest) -> HTTPRequest {
        guard request.method == "POST", let override = request.header("x-http-method-override"),
              ["GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT", "COPY"].contains(override),
              override != "POST" else { return request }
        var overridden = HTTPRequest(method: override, path: request.path, query: request.query, headers: request.headers,
                                     body: request.body, bodySink: request.bodySink)
        overridden.peerAddress = request.peerAddress
        return overridden
    }

    /// CouchDB's request nonce: ten hex digits, sent back as `X-Couch-Request-ID`. It tells
    /// requests apart in logs and is no secret, so every answer need not pay the cryptographic
    /// generator (its lock and cipher): a counter from a random start, scrambled by SplitMix64.
    static func requestID() -> String {
        var mixed = requestCounter.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        mixed ^= mixed >> 31
        return Digest.hex((0..<5).lazy.map { UInt8(truncatingIfNeeded: mixed >> ($0 * 8)) })
    }
    private static let requestCounter = Atomic<UInt64>(
        Digest.randomBytes(8).reduce(0) { $0 << 8 | UInt64($1) })

    /// JSONP (`?callback=name`, only with `[chttpd] allow_jsonp = true`): a JSON answer becomes
    /// `/* CouchDB */name(...);` as `application/javascript`. A callback name with other
    /// characters than letters, digits and `._[]` answers 400, as CouchDB.
    static func wrappingJSONP(_ response: HTTPResponse, request: HTTPRequest, allowed: Bool) -> HTTPResponse {
        guard allowed, let callback = request.queryValue("callback"), !callback.isEmpty,
              response.header("Content-Type") == HTTPResponse.jsonContentType else { return response }
        guard callback.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
                                                                  || "._[]".unicodeScalars.contains($0)) }) else {
            return .error(CouchError.badRequest("invalid_callback"))
        }
        let prefix = Array("/* CouchDB */\(callback)(".utf8)
        var wrapped = response
        wrapped.setHeader("Content-Type", "application/javascript")
        switch response.body {
        case .bytes(var bytes):
            if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
            wrapped.body = .bytes(prefix + bytes + Array(");\n".utf8))
        case .stream(let inner):
            wrapped.body = .stream(JSONPStream(inner: inner, prefix: prefix))
        case .file, .deferred:
            return response
        }
        return wrapped
    }
}

/// A streamed JSON answer (a feed, `_all_docs`) inside a JSONP call.
final class JSONPStream: ResponseStream, @unchecked Sendable {
    private let inner: ResponseStream
    private var pending: [UInt8]
    private var suffix: [UInt8]? = Array(");\n".utf8)

    init(inner: ResponseStream, prefix: [UInt8]) {
        self.inner = inner
        pending = prefix
    }

    func start(wake: @escaping @Sendable () -> Void) { inner.start(wake: wake) }
    func close() { inner.close() }
    var waitsForEvents: Bool { inner.waitsForEvents }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        if pending.isEmpty {
            switch inner.read(into: buffer) {
            case .end:
                guard let suffix else { return .end }
                self.suffix = nil
                pending = suffix
            case let other:
                return other
            }
        }
        let count = min(buffer.count, pending.count)
        pending.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        pending.removeFirst(count)
        return .data(count)
    }
}

extension RouteContext {
    /// CouchDB's write quorum: `w` (the query's, or `_bulk_docs`' body member) above the one
    /// copy this node keeps is not met, and CouchDB answers 202 `accepted` for a write that
    /// went in; otherwise `status`.
    func quorumStatus(_ status: Int, bodyW: JSONValue? = nil) -> Int {
        let w = bodyW?.intValue ?? request.queryValue("w").flatMap { Int($0) } ?? 1
        return w > 1 ? 202 : status
    }

    /// `?batch=ok`: CouchDB queues the write and answers 202 at once, whatever becomes of it
    /// (errors are only logged). Couchette writes before answering; a failed write is logged.
    func batchWrite(id: DocumentID, _ write: () throws -> RevisionID) throws -> HTTPResponse? {
        guard request.queryValue("batch") == "ok" else { return nil }
        do {
            _ = try write()
        } catch {
            server.logger.notice("batch write of \(id.rawValue) failed: \(error)")
        }
        return .json(202, ["ok": true, "id": JSONValue(id.rawValue)])
    }
}
