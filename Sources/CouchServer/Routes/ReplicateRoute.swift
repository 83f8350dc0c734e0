import CouchCore
import CouchReplication
import Foundation

/// `POST /_replicate`: starts a replication (or joins the same one already running), or
/// cancels one. A continuous replication answers `202 {"ok":true,"_local_id":...}` at
/// once; a one-shot replication answers CouchDB's result (`ok`, `session_id`,
/// `source_last_seq`, `history`, ...) when it is done — through a suspended streaming
/// response, so a long replication holds a connection, not one of the listener's threads.
///
/// Errors found before the replication starts (a bad body, a missing local database)
/// answer with CouchDB's status; errors found later by a one-shot replication (an
/// unreachable or missing remote database) come as the same `{"error", "reason"}` body
/// but under the status already sent (200).
enum ReplicateRoute {
    static func postReplicate(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        let manager = context.server.replications
        let request: ReplicationSettings.Request
        do {
            request = try ReplicationSettings.request(from: body)
        } catch {
            throw CouchError.badRequest(error.reason)
        }
        switch request {
        case .cancelByID(let id):
            return cancelled(manager.cancel(id: id))
        case .cancel(let settings):
            guard let id = manager.knownReplicationID(for: settings) else {
                return stream(manager, settings, status: 200, cancelling: true)
            }
            return cancelled(manager.cancel(id: id.jobID))
        case .start(let settings):
            if let missing = missingLocalDatabase(settings, context) {
                var response = HTTPResponse.error(missing)
                response.status = 404   // CouchDB's status for db_not_found
                return response
            }
            if settings.continuous, let id = manager.knownReplicationID(for: settings) {
                do {
                    _ = try manager.start(settings, id: id)
                } catch {
                    return failure(error)
                }
                return .json(202, ["ok": true, "_local_id": JSONValue(id.jobID)])
            }
            return stream(manager, settings, status: settings.continuous ? 202 : 200, cancelling: false)
        }
    }

    private static func cancelled(_ job: Replication?) -> HTTPResponse {
        guard let job else { return .error(CouchError.notFound("missing")) }
        return .json(200, ["ok": true, "_local_id": JSONValue(job.id.jobID)])
    }

    /// CouchDB's answer to a replication that could not run: 400 for a bad request, else
    /// 500 with the error's name (a peer's 401 is the replication's failure, not the client's).
    static func failure(_ error: ReplicationError) -> HTTPResponse {
        var response = HTTPResponse.error(error)
        if error.kind != .badRequest { response.status = 500 }
        return response
    }

    /// A local source must exist, and a local target unless it is to be created.
    private static func missingLocalDatabase(_ settings: ReplicationSettings, _ context: RouteContext) -> ReplicationError? {
        let databases = context.server.databases
        if case .local(let name) = settings.source, !databases.exists(name) {
            return ReplicationError(.databaseNotFound, "could not open \(name.rawValue)")
        }
        if case .local(let name) = settings.target, !settings.createTarget, !databases.exists(name) {
            return ReplicationError(.databaseNotFound, "could not open \(name.rawValue)")
        }
        return nil
    }

    private static func stream(_ manager: ReplicationManager, _ settings: ReplicationSettings, status: Int,
                               cancelling: Bool) -> HTTPResponse {
        let stream = ReplicationResultStream(manager: manager, settings: settings, cancelling: cancelling)
        return HTTPResponse(status: status, headers: [("Content-Type", HTTPResponse.jsonContentType)], body: .stream(stream))
    }

    /// The JSON body for a finished replication.
    static func body(_ outcome: Replication.Outcome) -> JSONValue {
        switch outcome {
        case .completed(let log):
            var result: JSONObject = ["ok": true]
            for (key, value) in log { result[key] = value }
            return .object(result)
        case .failed(let error):
            return error.json
        case .cancelled:
            return CouchError(.stopped, "The replication was cancelled.").json
        }
    }
}

/// The body of a `_replicate` answer that waits for the replication: empty (the
/// connection suspended) until the job has started (continuous) or finished (one-shot).
final class ReplicationResultStream: ResponseStream, @unchecked Sendable {
    private let manager: ReplicationManager
    private let settings: ReplicationSettings
    private let cancelling: Bool
    private let lock = NSLock()
    private var output: [UInt8]?
    private var offset = 0

    init(manager: ReplicationManager, settings: ReplicationSettings, cancelling: Bool) {
        self.manager = manager
        self.settings = settings
        self.cancelling = cancelling
    }

    func start(wake: @escaping @Sendable () -> Void) {
        let (manager, settings, cancelling) = (self.manager, self.settings, self.cancelling)
        ReplicationTasks.task {
            let answer: JSONValue
            do {
                if cancelling {
                    let id = try await manager.replicationID(for: settings)
                    answer = manager.cancel(id: id.jobID) != nil
                        ? ["ok": true, "_local_id": JSONValue(id.jobID)] : ["error": "not found"]
                } else {
                    let job = try await manager.start(settings)
                    if settings.continuous {
                        answer = ["ok": true, "_local_id": JSONValue(job.id.jobID)]
                    } else {
                        answer = ReplicateRoute.body(await job.waitForOutcome())
                    }
                }
            } catch let error as ReplicationError {
                answer = error.json
            } catch {
                answer = ReplicationError(.unknown, String(describing: error)).json
            }
            self.deliver(answer)
            wake()
        }
    }

    private func deliver(_ answer: JSONValue) {
        var bytes = answer.serialized()
        bytes.append(UInt8(ascii: "\n"))
        lock.lock()
        output = bytes
        lock.unlock()
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamChunk {
        lock.lock()
        defer { lock.unlock() }
        guard let output else { return .waiting }
        guard offset < output.count else { return .end }
        let count = min(buffer.count, output.count - offset)
        output.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: count)
        }
        offset += count
        return .data(count)
    }

    /// The client went away; the replication goes on (as in CouchDB).
    func close() {}
}
