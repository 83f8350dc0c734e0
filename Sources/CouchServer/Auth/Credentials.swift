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
}

/// Finds credentials as CouchDB's `chttpd_auth_cache:get_user_creds` does: a server
/// admin (roles `_admin` plus those of a `_users` document of the same name), else the
/// user document `org.couchdb.user:NAME` in `_users`.
struct CredentialStore: Sendable {
    let admins: AdminRegistry
    let databases: DatabaseManager

    func credentials(for name: String) -> StoredCredentials? {
        let document = userDocument(name)
        if let adminHash = admins.hash(for: name) {
            var roles = [UserContext.adminRole]
            for role in Self.roles(of: document) where !roles.contains(role) { roles.append(role) }
            return StoredCredentials(name: name, roles: roles, hash: adminHash)
        }
        guard let document, let hash = PasswordHash(userDocument: document) else { return nil }
        return StoredCredentials(name: name, roles: Self.roles(of: document), hash: hash)
    }

    private func userDocument(_ name: String) -> JSONObject? {
        guard let database = try? databases.database(UsersDatabase.name),
              let snapshot = try? database.document(UsersDatabase.documentID(for: name)) else { return nil }
        return try? JSONValue.parse(snapshot.revision.body).objectValue
    }

    private static func roles(of document: JSONObject?) -> [String] {
        document?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }
}
