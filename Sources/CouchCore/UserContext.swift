/// Who is asking, as CouchDB's `userCtx` says it: a name (nil for anonymous) and roles.
/// Server admins carry the `_admin` role; in the admin party everyone does.
public struct UserContext: Sendable, Equatable {
    public var name: String?
    public var roles: [String]
    /// The authentication handler that vouched for the user, by CouchDB's name
    /// (`cookie` or `default` for HTTP Basic); nil when nobody did.
    public var authenticatedBy: String?

    public init(name: String?, roles: [String], authenticatedBy: String? = nil) {
        self.name = name
        self.roles = roles
        self.authenticatedBy = authenticatedBy
    }

    public static let adminRole = "_admin"
    public static let anonymous = UserContext(name: nil, roles: [])
    /// Writes made by the server itself (the replicator between local databases, the
    /// command line), which CouchDB makes as an admin.
    public static let internalWriter = UserContext(name: nil, roles: [adminRole])
    /// CouchDB's admin party: no admin is configured, so every client is one.
    public static let adminParty = UserContext(name: nil, roles: [adminRole], authenticatedBy: "default")

    public var isServerAdmin: Bool { roles.contains(Self.adminRole) }
    public var isAnonymous: Bool { name == nil }

    /// `{"name": ..., "roles": [...]}` as `_session` shows it.
    public var json: JSONValue {
        let nameValue: JSONValue = name.map { JSONValue($0) } ?? .null
        let roleValues: [JSONValue] = roles.map { JSONValue($0) }
        return .object(JSONObject([(key: "name", value: nameValue), (key: "roles", value: .array(roleValues))]))
    }
}
