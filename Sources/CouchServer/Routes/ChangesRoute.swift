import CouchCore
import CouchStore

/// `GET|POST /db/_changes` in every feed type.
enum ChangesRoute {
    static func getChanges(_ context: RouteContext) throws -> HTTPResponse {
        try respond(context, body: nil)
    }

    static func postChanges(_ context: RouteContext) throws -> HTTPResponse {
        let body = context.request.body.isEmpty ? nil : try context.jsonObjectBody()
        return try respond(context, body: body)
    }

    private static func respond(_ context: RouteContext, body: JSONObject?) throws -> HTTPResponse {
        let database = try context.database()
        let options = try ChangesOptions(context, body: body)
        let feed = ChangesFeed(database: database, options: options, offThread: context.server.longRequests)
        try feed.prepare()
        return HTTPResponse(status: 200, headers: [("Content-Type", feed.contentType)],
                            body: .stream(CountedStream(feed.stream, metrics: context.server.metrics)))
    }
}
