import CouchCore

/// A database's `_security` object: `admins` and `members`, each with `names` and
/// `roles`. Any other member is kept as given (validation functions may read it).
struct SecurityObject: Sendable, Equatable {
    struct Group: Sendable, Equatable {
        var names: [String] = []
        var roles: [String] = []

        var isEmpty: Bool { names.isEmpty && roles.isEmpty }

        init(names: [String] = [], roles: [String] = []) {
            self.names = names
            self.roles = roles
        }

        init(_ value: JSONValue?) {
            names = value?["names"]?.arrayValue?.compactMap(\.stringValue) ?? []
            roles = value?["roles"]?.arrayValue?.compactMap(\.stringValue) ?? []
        }

        /// CouchDB's `is_authorized`: the user has one of the roles (`_admin` always
        /// counts) or is one of the names.
        func includes(_ user: UserContext) -> Bool {
            if user.roles.contains(where: { $0 == UserContext.adminRole || roles.contains($0) }) { return true }
            guard let name = user.name else { return false }
            return names.contains(name)
        }
    }

    let json: JSONObject
    let admins: Group
    let members: Group

    init(json: JSONObject) {
        self.json = json
        admins = Group(json["admins"])
        // CouchDB still reads `readers`, the old name of `members`.
        members = Group(json["members"] ?? json["readers"])
    }

    /// CouchDB 3's `default_security = admin_only`: what a new database gets.
    static let adminOnly = SecurityObject(json: [
        "members": ["roles": ["_admin"]],
        "admins": ["roles": ["_admin"]],
    ])

    /// `default_security = everyone`, and the `_users` database (whose documents have
    /// their own rules): no members, so anyone may use it; only server admins administer it.
    static let everyone = SecurityObject(json: [:])

    /// A body for `PUT /db/_security`, checked as CouchDB's `validate_security_object`. CouchDB
    /// checks it on each shard, and a refusal from all of them answers 500 `error` (its reason
    /// `no_majority`); Couchette answers the same status and error with the refusal's reason.
    static func validated(_ value: JSONValue) throws(CouchError) -> SecurityObject {
        func refuse(_ reason: String) -> CouchError { CouchError(.error, reason) }
        guard let object = value.objectValue else { throw refuse("Security object must be a JSON object") }
        for key in ["admins", "members", "readers"] {
            guard let group = object[key] else { continue }
            guard let groupObject = group.objectValue else {
                throw refuse("admins or members must be a JSON list of strings")
            }
            for field in ["names", "roles"] {
                guard let list = groupObject[field] else { continue }
                guard let items = list.arrayValue, items.allSatisfy({ $0.stringValue != nil }) else {
                    throw refuse("\(field) must be a JSON list of strings")
                }
            }
        }
        return SecurityObject(json: object)
    }

    func access(for user: UserContext) -> DatabaseAccess {
        let isAdmin = admins.includes(user)
        return DatabaseAccess(isAdmin: isAdmin, isMember: isAdmin || members.isEmpty || members.includes(user))
    }
}

/// What a user may do in one database.
struct DatabaseAccess: Sendable, Equatable {
    let isAdmin: Bool
    let isMember: Bool

    static let full = DatabaseAccess(isAdmin: true, isMember: true)
}
