import CouchCore
import CouchFunctions
import CouchStore

/// A `_changes` request's parameters, read once from the query string and, for POST, the body.
struct ChangesOptions: Sendable {
    enum Feed: String, Sendable {
        case normal, longpoll, continuous, eventsource
    }

    var feed = Feed.normal
    var since = 0
    var sinceNow = false
    var limit: Int?
    var descending = false
    var includeDocs = false
    var conflicts = false
    var allLeaves = false
    /// Milliseconds between heartbeats; nil for none.
    var heartbeat: Int?
    /// Milliseconds of idleness after which a waiting feed ends (ignored with a heartbeat, as in CouchDB).
    var timeout = 60_000
    var filter: ChangeFilter?
    var attachments = AttachmentRenderOptions()
    /// What the user may see of the documents: filters judge and rows carry only that.
    let reader: DocumentReadRule

    static let defaultHeartbeat = 60_000
    /// Heartbeats and timeouts are clamped here (Erlang's timer limit, 2^32 - 1 ms, ~49 days)
    /// so that the client's number never reaches timer arithmetic that could overflow.
    static let longestWait = 4_294_967_295

    init(_ context: RouteContext, body: JSONObject?) throws {
        let request = context.request
        if let raw = request.queryValue("feed") {
            // `live` is CouchDB's other name for `continuous`.
            guard let parsed = raw == "live" ? .continuous : Feed(rawValue: raw) else {
                throw CouchError.badRequest("Supported `feed` types: normal, continuous, live, longpoll, eventsource")
            }
            feed = parsed
        }
        // A browser's EventSource reconnecting sends `Last-Event-ID`: for an eventsource feed
        // CouchDB takes it as `since`, before the query; `last-event-id` in the query is `since` too.
        let lastEventID = feed == .eventsource ? request.header("last-event-id") : nil
        if let raw = lastEventID ?? request.queryValue("last-event-id") ?? request.queryValue("since") {
            if raw == "now" { sinceNow = true } else { since = try Self.sequence(from: raw) }
            // CouchDB 3 refuses every bare number (it reads only its own `N-opaque` form), as
            // Couchette refuses one past the last change: a client would take it back as
            // `last_seq`, a position the database never had.
            if !sinceNow, !raw.contains("-"), since > (try context.database().updateSequence) {
                throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
            }
        }
        limit = try context.nonNegativeIntOption("limit")
        descending = try context.boolOption("descending")
        includeDocs = try context.boolOption("include_docs")
        conflicts = try context.boolOption("conflicts")
        switch request.queryValue("style") ?? "main_only" {
        case "main_only": allLeaves = false
        case "all_docs": allLeaves = true
        default: throw CouchError.badRequest("Supported `style` values: main_only, all_docs")
        }
        if let raw = request.queryValue("heartbeat") {
            if raw == "true" {
                heartbeat = Self.defaultHeartbeat
            } else {
                // CouchDB's two reasons: not an integer, or not a positive one. Integers too
                // large for 64 bits are positive and saturate.
                let digits = raw.hasPrefix("-") || raw.hasPrefix("+") ? raw.dropFirst() : Substring(raw)
                guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                    throw CouchError.badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
                }
                let value = Int(raw) ?? (raw.hasPrefix("-") ? -1 : Int.max)
                guard value > 0 else {
                    throw CouchError.badRequest("The heartbeat value should be a positive integer (in milliseconds).")
                }
                heartbeat = min(value, Self.longestWait)
            }
        }
        if let value = try context.intOption("timeout") {
            // 0 is allowed: the feed ends as soon as it is caught up.
            guard value >= 0 else { throw CouchError.badRequest("Invalid timeout value.") }
            timeout = min(value, Self.longestWait)
        }
        filter = try Self.filter(context, body: body)
        let database = try context.database()
        attachments = try AttachmentRenderOptions(context, database: database)
        reader = try context.documentReadRule(for: database)
    }

    /// Sequences are integers; clients may send them as numbers, strings, or CouchDB's
    /// `N-opaque` form, of which the leading number is ours.
    static func sequence(from raw: String) throws(CouchError) -> Int {
        guard let sequence = UpdateSequence(parsing: raw) else {
            throw CouchError.badRequest("Malformed sequence supplied in 'since' parameter.")
        }
        return sequence.number
    }

    private static func filter(_ context: RouteContext, body: JSONObject?) throws -> ChangeFilter? {
        guard let name = context.request.queryValue("filter"), !name.isEmpty else { return nil }
        switch name {
        case "_doc_ids":
            let queryIDs = try context.jsonOption("doc_ids")
            let ids = body?["doc_ids"] ?? queryIDs
            guard let list = ids?.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw CouchError.badRequest("`doc_ids` filter parameter is not a list of doc ids.")
            }
            return DocumentIDsFilter(ids: Set(list.compactMap(\.stringValue)))
        case "_design":
            return DesignDocumentFilter()
        case "_selector":
            guard let selector = body?["selector"] else {
                throw CouchError.badRequest("Selector must be specified in POST payload")
            }
            return SelectorFilter(selector: try parseSelector(selector))
        case "_view":
            return try viewFilter(context)
        default:
            return try designFilter(name, context: context, body: body)
        }
    }

    private static func parseSelector(_ selector: JSONValue) throws(CouchError) -> MangoSelector {
        do {
            return try MangoSelector(selector)
        } catch {
            throw CouchError.badRequest(error.reason)
        }
    }

    /// `ddoc/name`: the design document's filter function (or a native one registered under
    /// that name), with the request as CouchDB's `req`; CouchDB's 404s when it is missing.
    private static func designFilter(_ name: String, context: RouteContext, body: JSONObject?) throws -> ChangeFilter? {
        let database = try context.database()
        let functions = context.server.functions
        let req = context.functionRequestFields(id: nil)
        let filter = try functions.filter(name, in: database,
                                          request: req.json(database: database, securityObject: functions.securityObject(of: database)))
        return DesignFunctionFilter(filter: filter)
    }

    /// `filter=_view&view=ddoc/view`: documents the view's map function emits for;
    /// CouchDB's 400 without `view`, 404 for a missing design document or view.
    private static func viewFilter(_ context: RouteContext) throws -> ChangeFilter? {
        let database = try context.database()
        let functions = context.server.functions
        let req = context.functionRequestFields(id: nil)
        let filter = try functions.filter("_view", in: database,
                                          request: req.json(database: database, securityObject: functions.securityObject(of: database)))
        return DesignFunctionFilter(filter: filter)
    }
}
