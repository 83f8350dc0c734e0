import CouchCore
import Foundation

/// CouchDB's `req` object as filter (and show/list/update) functions receive it.
public struct FilterRequest: Sendable {
    public var method = "GET"
    /// The query string's parameters (a replication's `query_params`).
    public var query = JSONObject()
    /// The request body as text (`"undefined"` when there is none, as CouchDB sends it).
    public var body: String?
    public var headers = JSONObject()
    /// The path's segments, `["db", "_changes"]`.
    public var path: [String]
    /// The path as requested, with its query string (CouchDB's `raw_path`); by default the
    /// segments joined.
    public var rawPath: String?
    public var peer = "127.0.0.1"
    public var cookie = JSONObject()
    public var form = JSONObject()
    public var user: UserContext
    public var id: String?

    public init(path: [String], user: UserContext) {
        self.path = path
        self.user = user
    }

    /// The object, with the database's `info`, `secObj` and a fresh `uuid`.
    public func json(database: any FunctionDatabase, securityObject: JSONObject) -> JSONValue {
        var info = JSONObject()
        if let stored = try? database.info() {
            info = [
                "db_name": JSONValue(stored.name.rawValue), "update_seq": UpdateSequence(stored.updateSequence).json,
                "doc_count": JSONValue(stored.documentCount), "doc_del_count": JSONValue(stored.deletedDocumentCount),
                "instance_start_time": JSONValue(stored.instanceStartTime),
                "sizes": ["file": JSONValue(stored.fileSize), "external": JSONValue(stored.externalSize),
                          "active": JSONValue(stored.activeSize)],
                "purge_seq": UpdateSequence(0).json, "compact_running": JSONValue(stored.compactRunning), "disk_format_version": 8,
            ]
        }
        let pathValue = JSONValue.array(path.map { JSONValue($0) })
        return .object(JSONObject([
            (key: "info", value: .object(info)),
            (key: "id", value: id.map { JSONValue($0) } ?? .null),
            (key: "uuid", value: JSONValue(Digest.randomHex(bytes: 16))),
            (key: "method", value: JSONValue(method)),
            (key: "requested_path", value: pathValue),
            (key: "path", value: pathValue),
            (key: "raw_path", value: JSONValue(rawPath ?? "/" + path.joined(separator: "/"))),
            (key: "query", value: .object(query)),
            (key: "headers", value: .object(headers)),
            (key: "body", value: JSONValue(body ?? "undefined")),
            (key: "peer", value: JSONValue(peer)),
            (key: "form", value: .object(form)),
            (key: "cookie", value: .object(cookie)),
            (key: "userCtx", value: FunctionRuntime.userContext(user, database: database.name)),
            (key: "secObj", value: .object(securityObject)),
        ]))
    }
}

extension DocumentFilter {
    /// A stored revision as filters see it: `_id`, `_rev`, the body, `_deleted`. Spliced
    /// from the stored bytes, without parsing them.
    public static func document(id: DocumentID, revision: RevisionID, isDeleted: Bool, body: [UInt8]?) -> [UInt8] {
        var bytes: [UInt8] = Array("{\"_id\":".utf8)
        bytes += JSONValue(id.rawValue).serialized()
        bytes += Array(",\"_rev\":".utf8)
        revision.appendJSON(to: &bytes)
        if isDeleted { bytes += Array(",\"_deleted\":true".utf8) }
        if let body, body.count > 2, body.first == UInt8(ascii: "{") {
            bytes.append(UInt8(ascii: ","))
            bytes += body.dropFirst()
        } else {
            bytes.append(UInt8(ascii: "}"))
        }
        return bytes
    }
}

extension FunctionRuntime {
    /// The `secObj` functions of `database` see.
    public func securityObject(of database: any FunctionDatabase) -> JSONObject { securityObjectProvider(database) }
}
