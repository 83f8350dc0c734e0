import CouchCore
import CouchStore

/// `GET /_db_updates`: databases created, updated and deleted, in every feed type.
enum DatabaseUpdatesRoute {
    static func getDatabaseUpdates(_ context: RouteContext) throws -> HTTPResponse {
        let options = try DatabaseUpdatesFeed.Options(context)
        let feed = DatabaseUpdatesFeed(log: context.server.databases.updates, options: options)
        var headers = [("Content-Type", feed.contentType)]
        if options.feed == .eventsource { headers.append(("Cache-Control", "no-cache")) }
        return HTTPResponse(status: 200, headers: headers.map { (name: $0.0, value: $0.1) }, body: .stream(CountedStream(feed, metrics: context.server.metrics)))
    }
}
