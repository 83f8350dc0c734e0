import CouchCore
import CouchStore

/// A name and password from `Authorization: Basic`, read as CouchDB reads it.
struct BasicCredentials {
    let name: String
    let password: String

    /// nil when the request carries none, a header that is not `Basic <base64>` (`Bearer x`,
    /// `Basic: …`: ignored, the request goes on anonymously, as in CouchDB's `basic_name_pw`)
    /// or CouchDB's `_:_` "log me out" pair; `bad_request` for invalid base64, as CouchDB.
    static func parse(_ header: String?) throws(CouchError) -> BasicCredentials? {
        guard let header, header.hasPrefix("Basic ") else { return nil }
        guard let bytes = Base64URL.decodeStandard(String(header.dropFirst(6)).trimmingWhitespace()) else {
            throw CouchError.badRequest("Authorization header has invalid base64 value")
        }
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              let name = String(validating: bytes[..<colon], as: UTF8.self),
              let password = String(validating: bytes[(colon + 1)...], as: UTF8.self) else { return nil }
        if name == "_", password == "_" { return nil }
        return BasicCredentials(name: name, password: password)
    }
}

/// What a user's password is checked against, and the roles the user then has.
struct StoredCredentials {
    let name: String
    let roles: [String]
    let hash: PasswordHash
    /// The user document the credentials come from (nil for a server admin), for upgrading its hash.
    let document: JSONObject?
}

/// Finds credentials as CouchDB's `chttpd_auth_cache:get_user_creds` does: a server
/// admin (roles `_admin` plus those of a user document of the same name), else the
/// user document `org.couchdb.user:NAME` in the users database (`authentication_db`).
struct CredentialStore: Sendable {
    let admins: AdminRegistry
    let databases: DatabaseManager
    let usersDatabase: DatabaseName
    /// `[chttpd_auth] allow_conflicted_user_docs`: whether a user document in conflict may
    /// still authenticate (CouchDB refuses it by default: which password would be the user's?).
    var allowConflicts = false

    static let conflicted = CouchError(.unauthorized, "User document conflicts must be resolved before the document is used for authentication purposes.")

    func credentials(for name: String) throws(CouchError) -> StoredCredentials? {
        let document = try userDocument(name)
        if let adminHash = admins.hash(for: name) {
            var roles = [UserContext.adminRole]
            for role in Self.roles(of: document) where !roles.contains(role) { roles.append(role) }
            return StoredCredentials(name: name, roles: roles, hash: adminHash, document: nil)
        }
        guard let document, let hash = PasswordHash(userDocument: document) else { return nil }
        return StoredCredentials(name: name, roles: Self.roles(of: document), hash: hash, document: document)
    }

    private func userDocument(_ name: String) throws(CouchError) -> JSONObject? {
        guard let database = try? databases.database(usersDatabase),
              let snapshot = try? database.document(UsersDatabase.documentID(for: name)),
              var body = try? JSONValue.parse(snapshot.revision.body).objectValue else { return nil }
        if !allowConflicts, !snapshot.record.tree.conflicts.isEmpty { throw Self.conflicted }
        body["_id"] = JSONValue(snapshot.revision.id.rawValue)
        body["_rev"] = JSONValue(snapshot.revision.revision.description)
        return body
    }

    private static func roles(of document: JSONObject?) -> [String] {
        document?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }
}
