import CouchCore
import Foundation
import Logging

/// `/_node/{node}` and `/_node/{node}/_config[/section[/key]]`, as CouchDB's `chttpd_node`
/// answers them. Values are strings; `PUT` and `DELETE` answer the old value. Admins are
/// shown and answered as their PBKDF2 hashes, never as the password that was sent.
enum ConfigurationRoutes {
    /// Sections CouchDB refuses to change over HTTP (`couch_util:check_config_blacklist`).
    static let protectedSections: Set<String> = [
        "daemons", "external", "httpd_design_handlers", "httpd_db_handlers", "httpd_global_handlers",
        "native_query_servers", "os_daemons", "query_servers", "feature_flags",
    ]

    /// The node a path names: `_local` or this node's name; `not_found` for any other.
    static func checkNode(_ context: RouteContext) throws {
        guard case .node(let node, _) = context.endpoint else { throw CouchError.internalError("not a node route") }
        guard node == "_local" || node == ServerInfo.nodeName else { throw CouchError.notFound("no such node: \(node)") }
    }

    static func getNodeName(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        return .json(200, ["name": JSONValue(ServerInfo.nodeName)])
    }

    /// Every section and key in force, admins included (hashed).
    private static func sections(_ context: RouteContext) -> [String: [(String, String)]] {
        var sections: [String: [(String, String)]] = [:]
        var order: [String] = []
        for entry in context.server.configuration.entries {
            if sections[entry.section] == nil { order.append(entry.section) }
            sections[entry.section, default: []].removeAll { $0.0 == entry.key }
            sections[entry.section, default: []].append((entry.key, entry.value))
        }
        let admins = context.server.accessControl.admins
        if !admins.isEmpty { sections["admins"] = admins.names.map { ($0, admins.admins[$0]!.adminEntry) } }
        return sections
    }

    private static func object(_ pairs: [(String, String)]) -> JSONValue {
        var object = JSONObject()
        for (key, value) in pairs.sorted(by: { $0.0 < $1.0 }) { object[key] = JSONValue(value) }
        return .object(object)
    }

    static func getConfiguration(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        var result = JSONObject()
        for (section, pairs) in sections(context).sorted(by: { $0.key < $1.key }) { result[section] = object(pairs) }
        return .json(200, .object(result))
    }

    static func getSection(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        guard case .node(_, .configSection(let section)) = context.endpoint else { throw CouchError.notFound() }
        return .json(200, object(sections(context)[section] ?? []))
    }

    static func getKey(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        let (section, key) = try sectionAndKey(context)
        guard let value = sections(context)[section]?.last(where: { $0.0 == key })?.1 else {
            throw CouchError.notFound("unknown_config_value")
        }
        return .json(200, JSONValue(value))
    }

    /// Checked as CouchDB checks (a blacklisted section, a JSON string, names and value on one
    /// printable line), then `ConfigurationRules`' type and range of the keys Couchette reads
    /// (400 with the rule), and never a path (403, as CouchDB refuses a blacklisted section).
    static func putKey(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        let (section, key) = try sectionAndKey(context)
        try checkWritable(section)
        guard let raw = try context.jsonBody().stringValue else {
            throw CouchError.badRequest("The value of a configuration key must be a JSON string")
        }
        let value = raw.trimmingWhitespace()
        do {
            try ConfigurationRules.checkSection(section)
            if section != "admins" { try ConfigurationRules.checkKey(key) }
            try ConfigurationRules.checkValue(value)
        } catch {
            throw CouchError.badRequest(error.description)
        }
        if ConfigurationRules.isPath(section: section, key: key) {
            throw CouchError(.forbidden, "Config key naming a path cannot be modified over HTTP API.")
        }
        let old = currentValue(context, section: section, key: key) ?? ""
        try set(context, section: section, key: key, value: value)
        context.server.logger.info("configuration: set [\(section)] \(key)")
        return .json(200, JSONValue(old))
    }

    static func deleteKey(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        let (section, key) = try sectionAndKey(context)
        try checkWritable(section)
        guard let old = currentValue(context, section: section, key: key) else {
            throw CouchError.notFound("unknown_config_value")
        }
        try set(context, section: section, key: key, value: nil)
        context.server.logger.info("configuration: deleted [\(section)] \(key)")
        return .json(200, JSONValue(old))
    }

    private static func currentValue(_ context: RouteContext, section: String, key: String) -> String? {
        sections(context)[section]?.last(where: { $0.0 == key })?.1
    }

    /// Sets a key, or removes it with nil; admins go to the admin registry, hashed.
    private static func set(_ context: RouteContext, section: String, key: String, value: String?) throws {
        if section == "admins" {
            try changeAdmin(context, name: key, password: value)
        } else {
            try change(context, section: section, key: key, value: value)
        }
    }

    static func postReload(_ context: RouteContext) throws -> HTTPResponse {
        try checkNode(context)
        let server = context.server
        do {
            server.liveConfiguration.reload()
            try server.install(try server.liveConfiguration.effective())
        } catch let error as ConfigurationError {
            throw CouchError.badRequest(error.description)
        }
        return .ok
    }

    private static func sectionAndKey(_ context: RouteContext) throws -> (String, String) {
        guard case .node(_, .configKey(let section, let key)) = context.endpoint else { throw CouchError.notFound() }
        return (section, key)
    }

    private static func checkWritable(_ section: String) throws {
        guard !protectedSections.contains(section) else {
            throw CouchError(.forbidden, "Config section blacklisted for modification over HTTP API.")
        }
    }

    private static func change(_ context: RouteContext, section: String, key: String, value: String?) throws {
        let server = context.server
        let persist = context.request.header("x-couch-persist") != "false"
        do {
            try server.liveConfiguration.change(section: section, key: key, value: value, persist: persist) { configuration in
                try server.install(configuration)
            }
        } catch let error as ConfigurationError {
            throw CouchError.badRequest(error.description)
        }
    }

    /// A new admin (the password hashed, or a hash taken as given) or one removed: the
    /// admins file is rewritten and the server's access control rebuilt from it.
    private static func changeAdmin(_ context: RouteContext, name: String, password: String?) throws {
        let server = context.server
        let access = server.accessControl
        guard AdminRegistry.isValidName(name) else { throw CouchError.badRequest("Invalid admin name") }
        var hash: PasswordHash?
        if let password {
            guard !password.isEmpty else { throw CouchError.badRequest("An admin password cannot be empty") }
            if PasswordHash.isHashedAdminEntry(password) {
                guard let given = PasswordHash(adminEntry: password) else { throw CouchError.badRequest("Malformed password hash") }
                hash = given
            } else {
                hash = access.hasher.hash(password)
            }
        }
        let path = AdminRegistry.path(in: server.databases.directory)
        let previous = access.admins
        do {
            try previous.setting(name, to: hash).save(to: path)
            try server.install(try server.liveConfiguration.effective())
        } catch {
            try? previous.save(to: path)
            if let error = error as? ConfigurationError { throw CouchError.badRequest(error.description) }
            throw error
        }
    }
}
