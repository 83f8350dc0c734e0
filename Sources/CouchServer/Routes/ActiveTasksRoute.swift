import CouchCore
import CouchReplication

/// `GET /_active_tasks`: the running replications, with CouchDB's fields (credentials redacted).
enum ActiveTasksRoute {
    static func getActiveTasks(_ context: RouteContext) throws -> HTTPResponse {
        .json(200, .array(context.server.scheduler.activeTasks))
    }
}
