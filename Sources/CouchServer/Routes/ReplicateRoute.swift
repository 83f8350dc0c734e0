import CouchCore
import CouchReplication
import Foundation

/// `POST /_replicate`: starts a replication through the scheduler (or joins the same one
/// already running), or cancels one. A continuous replication answers
/// `202 {"ok":true,"_local_id":...}` at once, as CouchDB 3 does; a one-shot replication
/// answers CouchDB's result (`ok`, `session_id`, `source_last_seq`, `history`, ...) when it
/// is done, or its failure with the status its error calls for (`db_not_found` 404,
/// `unauthorized` 401, `forbidden` 403, others 500). The answer is deferred: until then
/// the connection waits suspended, holding no listener thread.
enum ReplicateRoute {
    static func postReplicate(_ context: RouteContext) throws -> HTTPResponse {
        try context.requireJSONContentType()
        let body = try context.jsonObjectBody()
        // Couchette's sync pairs live in `_replicator` documents; here one direction would
        // silently be all that runs.
        if body["sync"]?.boolValue == true {
            throw CouchError.badRequest("`sync` pairs are _replicator documents; POST /_replicate copies one way (post the other direction too)")
        }
        let scheduler = context.server.scheduler
        let manager = scheduler.manager
        let request: ReplicationSettings.Request
        do {
            request = try ReplicationSettings.request(from: body)
        } catch {
            throw CouchError.badRequest(error.reason)
        }
        switch request {
        case .cancelByID(let id):
            return cancelled(scheduler.cancel(id: id))
        case .cancel(let settings):
            guard let id = manager.knownReplicationID(for: settings) else {
                return deferred(scheduler, settings, cancelling: true)
            }
            return cancelled(scheduler.cancel(id: id.jobID))
        case .start(let settings):
            if let missing = missingLocalDatabase(settings, context) { return failure(missing) }
            if settings.continuous, let id = manager.knownReplicationID(for: settings) {
                do {
                    _ = try scheduler.startNow(settings, id: id)
                } catch {
                    return failure(error)
                }
                return .json(202, ["ok": true, "_local_id": JSONValue(id.jobID)])
            }
            return deferred(scheduler, settings, cancelling: false)
        }
    }

    private static func cancelled(_ id: ReplicationID?) -> HTTPResponse {
        guard let id else { return .error(CouchError.notFound("missing")) }
        return .json(200, ["ok": true, "_local_id": JSONValue(id.jobID)])
    }

    /// CouchDB's answer to a replication that could not run, with the status its error
    /// calls for: 400 for a bad request, 404 for a missing database, 401/403 for refused
    /// credentials, else 500.
    static func failure(_ error: ReplicationError) -> HTTPResponse {
        var response = HTTPResponse.error(error)
        switch error.kind {
        case .badRequest: response.status = 400
        case .databaseNotFound, .notFound: response.status = 404
        case .unauthorized: response.status = 401
        case .forbidden: response.status = 403
        default: response.status = 500
        }
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

    private static func deferred(_ scheduler: ReplicationScheduler, _ settings: ReplicationSettings,
                                 cancelling: Bool) -> HTTPResponse {
        HTTPResponse(status: 200, body: .deferred(ReplicationAnswer(scheduler: scheduler, settings: settings,
                                                                    cancelling: cancelling)))
    }

    /// The answer for a finished replication.
    static func response(_ outcome: Replication.Outcome) -> HTTPResponse {
        switch outcome {
        case .completed(let log):
            var result: JSONObject = ["ok": true]
            for (key, value) in log { result[key] = value }
            return .json(200, .object(result))
        case .failed(let error):
            return failure(error)
        case .cancelled:
            return failure(CouchError(.stopped, "The replication was cancelled."))
        }
    }
}

/// The deferred answer of `_replicate`: computed once the replication ID is known (a
/// named filter's code may have to be fetched) and, for a one-shot replication, once the
/// job has finished.
final class ReplicationAnswer: DeferredResponse, @unchecked Sendable {
    private let scheduler: ReplicationScheduler
    private let settings: ReplicationSettings
    private let cancelling: Bool

    init(scheduler: ReplicationScheduler, settings: ReplicationSettings, cancelling: Bool) {
        self.scheduler = scheduler
        self.settings = settings
        self.cancelling = cancelling
    }

    /// The replication goes on if the client hangs up, as CouchDB's does.
    func start(cancellation: RequestCancellation, deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        let (scheduler, settings, cancelling) = (self.scheduler, self.settings, self.cancelling)
        ReplicationTasks.task {
            do {
                let id = try await scheduler.manager.replicationID(for: settings)
                if cancelling {
                    let cancelled = scheduler.cancel(id: id.jobID)
                    deliver(cancelled == nil ? .error(CouchError.notFound("missing"))
                                             : .json(200, ["ok": true, "_local_id": JSONValue(id.jobID)]))
                    return
                }
                let job = try scheduler.startNow(settings, id: id)
                if settings.continuous {
                    deliver(.json(202, ["ok": true, "_local_id": JSONValue(job.id.jobID)]))
                } else {
                    deliver(ReplicateRoute.response(await job.waitForOutcome()))
                }
            } catch let error as ReplicationError {
                deliver(ReplicateRoute.failure(error))
            } catch {
                deliver(ReplicateRoute.failure(ReplicationError(.unknown, String(describing: error))))
            }
        }
    }
}
