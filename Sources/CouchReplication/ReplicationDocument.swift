import CouchCore
import Foundation

/// A document of a `_replicator` database: CouchDB's rules for its shape (the
/// `_design/_replicator` validation function of `couch_replicator_js_functions`), its
/// `owner` and the credentials other users may not read (`couch_replicator_docs`), and the
/// fields the replicator writes back. Pure: the server and `ReplicatorDatabase` apply them.
public enum ReplicationDocument {
    /// A replicator database: `_replicator` or any `*/_replicator`.
    public static func isReplicatorDatabase(_ name: DatabaseName) -> Bool {
        name.isReplicator
    }

    /// The fields the replicator owns (never part of a replication's definition).
    static let stateFields: Set<String> = [
        "_replication_state", "_replication_state_time", "_replication_state_reason", "_replication_id",
        "_replication_stats",
    ]

    /// CouchDB's validation of a replication document (403 `forbidden` with its reasons).
    /// `userName`/`roles`/`isAdmin` describe the writer.
    public static func validate(_ body: JSONObject, isDeleted: Bool, old: JSONObject?, userName: String?,
                                roles: [String], isAdmin: Bool) throws(CouchError) {
        func refuse(_ reason: String) -> CouchError { CouchError(.forbidden, reason) }
        if roles.contains("_replicator") { return }
        if body["_replication_state"]?.stringValue == "failed" { return }
        if isDeleted {
            guard isAdmin else {
                guard let old, let owner = old["user_ctx"]?["name"]?.stringValue, owner == userName else {
                    throw refuse("Replication documents can only be deleted by admins or by the users who created them.")
                }
                return
            }
            return
        }
        try validateEndpoint(body["source"], "source")
        try validateEndpoint(body["target"], "target")
        if let value = body["create_target"], value.boolValue == nil {
            throw refuse("The `create_target' field must be a boolean.")
        }
        if let value = body["continuous"], value.boolValue == nil {
            throw refuse("The `continuous' field must be a boolean.")
        }
        if let value = body["doc_ids"], value.arrayValue == nil {
            throw refuse("The `doc_ids' field must be an array of strings.")
        }
        if let value = body["selector"], value.objectValue == nil, !value.isNull {
            throw refuse("The `selector' field must be an object.")
        }
        if let value = body["filter"], (value.stringValue ?? "").isEmpty {
            throw refuse("The `filter' field must be a non-empty string.")
        }
        if body["doc_ids"] != nil, body["selector"] != nil {
            throw refuse("`doc_ids' field is incompatible with `selector'.")
        }
        if body["doc_ids"] != nil || body["selector"] != nil, body["filter"] != nil {
            throw refuse("`filter' field is incompatible with `selector' and `doc_ids'.")
        }
        if let value = body["interval"],
           !(value.doubleValue.map { $0 > 0 && $0 <= ReplicatorDatabase.longestInterval } ?? false) {
            throw refuse("The `interval' field must be a number of seconds above 0 and at most \(Int(ReplicatorDatabase.longestInterval)).")
        }
        if let value = body["query_params"], value.objectValue == nil {
            throw refuse("The `query_params' field must be an object.")
        }
        if let context = body["user_ctx"], !context.isNull, context.boolValue != false {
            guard let object = context.objectValue else {
                throw refuse("The `user_ctx' property must be a non-null object.")
            }
            let name = object["name"]
            if let name, !name.isNull, (name.stringValue ?? "").isEmpty {
                throw refuse("The `user_ctx.name' property must be a non-empty string or null.")
            }
            if !isAdmin, name?.stringValue != userName {
                throw refuse("The given `user_ctx.name' is not valid")
            }
            if let list = object["roles"], !list.isNull {
                guard let list = list.arrayValue else {
                    throw refuse("The `user_ctx.roles' property must be an array of strings.")
                }
                if !isAdmin {
                    for role in list {
                        guard let role = role.stringValue, !role.isEmpty else { throw refuse("Roles must be non-empty strings.") }
                        if !roles.contains(role) { throw refuse("Invalid role (`\(role)') in the `user_ctx'") }
                    }
                }
            }
        } else if !isAdmin {
            throw refuse("The `user_ctx' property is missing (it is optional for admins only).")
        }
    }

    private static func validateEndpoint(_ value: JSONValue?, _ field: String) throws(CouchError) {
        guard let value, value.stringValue != nil || value.objectValue != nil else {
            throw CouchError(.forbidden, "The `\(field)' property must exist and be either a string or an object.")
        }
        guard let object = value.objectValue else { return }
        guard let url = object["url"]?.stringValue, !url.isEmpty else {
            throw CouchError(.forbidden, "The url property must exist in the `\(field)' field and must be a non-empty string.")
        }
        if let auth = object["auth"], auth.objectValue == nil {
            throw CouchError(.forbidden, "`\(field).auth' must be a non-null object.")
        }
        if let headers = object["headers"], headers.objectValue == nil {
            throw CouchError(.forbidden, "`\(field).headers' must be a non-null object.")
        }
    }

    /// CouchDB's `before_doc_update`: a document without `owner` gets its writer's name;
    /// only admins may write another user's document.
    public static func settingOwner(_ body: JSONObject, userName: String?, isAdmin: Bool) throws(CouchError) -> JSONObject {
        var body = body
        switch body["owner"] {
        case nil:
            body["owner"] = userName.map { JSONValue($0) } ?? .null
        case let owner? where owner.stringValue == userName && owner.stringValue != nil:
            break
        case let owner?:
            guard isAdmin else { throw CouchError(.forbidden, "Can't update replication documents from other users.") }
            if owner.isNull { body["owner"] = userName.map { JSONValue($0) } ?? .null }
        }
        return body
    }

    /// CouchDB's `after_doc_read`: a reader who is neither an admin nor the owner sees the
    /// endpoints without credentials: no `headers` or `auth`, and no user information in any
    /// URL (CouchDB strips `user:password@` from string endpoints only; an object's `url` and
    /// a proxy URL keep theirs there).
    public static func strippingCredentials(_ body: JSONObject) -> JSONObject {
        var body = body
        for field in ["source", "target"] {
            switch body[field] {
            case .string(let url)?:
                body[field] = JSONValue(strippingUserInformation(url))
            case .object(var endpoint)?:
                endpoint.removeValue(forKey: "headers")
                endpoint.removeValue(forKey: "auth")
                if case .string(let url)? = endpoint["url"] { endpoint["url"] = JSONValue(strippingUserInformation(url)) }
                body[field] = .object(endpoint)
            default:
                break
            }
        }
        for field in ["proxy", "source_proxy", "target_proxy"] {
            if case .string(let url)? = body[field] { body[field] = JSONValue(strippingUserInformation(url)) }
        }
        return body
    }

    /// `scheme://user:pass@host/...` (or `user@`, a token) → `scheme://host/...`. The user
    /// information ends at the authority's last `@`: a password may hold a raw `@`.
    static func strippingUserInformation(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return url }
        return String(url[..<scheme.upperBound]) + url[url.index(after: at)...]
    }

    /// The members that define the replication (what a change must touch to restart it).
    static func definition(_ body: JSONObject) -> String {
        var members = JSONObject()
        for (key, value) in body where !key.hasBytePrefix("_") && key != "owner" { members[key] = value }
        return JSONValue.object(members).serializedString()
    }

    /// The settings a document describes (the same parsing as `POST /_replicate`).
    public static func settings(_ body: JSONObject) throws(ReplicationError) -> ReplicationSettings {
        var settings = try ReplicationSettings(json: body)
        settings.isPersistent = true
        return settings
    }
}
