import CouchCore

extension ServerConfiguration {
    /// The configuration as `GET /_node/_local/_config` shows it: every key Couchette
    /// interprets, with its current value, then the other entries of the files it read.
    /// `[admins]` is not here: admins live hashed in their own file (see `AdminRegistry`).
    public var entries: [ConfigurationFile.Entry] {
        func entry(_ section: String, _ key: String, _ value: String) -> ConfigurationFile.Entry {
            ConfigurationFile.Entry(section: section, key: key, value: value)
        }
        let auth = authentication
        var result = [
            entry("chttpd", "port", String(listener.port)),
            entry("chttpd", "bind_address", listener.bindAddress),
            entry("chttpd", "max_http_request_size", String(listener.maximumBodySize)),
            entry("chttpd", "require_valid_user", String(auth.requireValidUser)),
            entry("chttpd", "require_valid_user_except_for_up", String(auth.requireValidUserExceptForUp)),
            entry("chttpd", "enable_cors", String(cors.isEnabled)),
            entry("chttpd_auth", "timeout", String(auth.sessionTimeout)),
            entry("chttpd_auth", "iterations", String(auth.iterations)),
            entry("chttpd_auth", "allow_persistent_cookies", String(auth.allowPersistentCookies)),
            entry("couchdb", "max_document_size", String(maximumDocumentSize)),
            entry("couchdb", "max_dbs_open", String(maximumOpenDatabases)),
            entry("couchdb", "maintenance_mode", maintenanceMode),
            entry("couchdb", "max_partition_size", String(maximumPartitionSize)),
            entry("query_server_config", "partition_query_limit", String(partitionQueryLimit)),
            entry("attachments", "compressible_types", attachmentCompression.types),
            entry("attachments", "compression_level", String(attachmentCompression.level)),
            entry("chttpd", "x_forwarded_host", forwardedHostHeader),
            entry("chttpd", "allow_jsonp", String(allowJSONP)),
            entry("couchdb", "default_security", auth.defaultSecurity.rawValue),
            entry("couchdb", "users_db_security_editable", String(auth.usersDatabaseSecurityEditable)),
            entry("cors", "origins", cors.origins.joined(separator: ", ")),
            entry("cors", "credentials", String(cors.credentials)),
            entry("cors", "methods", cors.methods.joined(separator: ", ")),
            entry("cors", "headers", cors.headers.joined(separator: ", ")),
            entry("cors", "exposed_headers", cors.exposedHeaders.joined(separator: ", ")),
            entry("cors", "max_age", String(cors.maxAge)),
            entry("couchette", "threads", String(listener.threadCount)),
            entry("couchette", "max_connections", String(listener.connectionLimit)),
            entry("couchette", "idle_timeout", String(listener.idleTimeoutSeconds)),
            entry("couchette", "max_url_length", String(listener.maximumURLLength)),
            entry("couchette", "max_header_size", String(listener.maximumHeaderSize)),
            entry("couchette", "header_timeout", Self.whole(listener.headerTimeoutSeconds)),
            entry("couchette", "body_timeout", Self.whole(listener.bodyGraceSeconds)),
            entry("couchette", "body_min_rate", String(listener.minimumBodyRate)),
            entry("log", "level", logLevel),
            entry("query_server_config", "os_process_timeout", Self.whole(functions.timeout * 1000)),
            entry("couchette", "function_memory_limit", String(functions.memory)),
            entry("replicator", "max_jobs", String(replicator.maxJobs)),
            entry("replicator", "interval", String(replicator.intervalMilliseconds)),
            entry("replicator", "max_churn", String(replicator.maxChurn)),
        ]
        result.append(entry("chttpd_auth", "min_iterations", String(auth.minimumIterations)))
        result.append(entry("chttpd_auth", "max_iterations", String(auth.maximumIterations)))
        if let sameSite = auth.cookieSameSite { result.append(entry("chttpd_auth", "same_site", sameSite)) }
        if let count = listener.maximumConnectionsPerAddress {
            result.append(entry("couchette", "max_connections_per_address", String(count)))
        }
        if let challenge = auth.wwwAuthenticate { result.append(entry("httpd", "WWW-Authenticate", challenge)) }
        return result + otherEntries.filter { $0.section != "admins" }
    }

    /// Keys `apply` reads, in every section it reads them from.
    static func isInterpreted(_ entry: ConfigurationFile.Entry) -> Bool {
        entry.section == "admins" || ConfigurationRules.kind(section: entry.section, key: entry.key) != nil
    }

    /// A whole number of seconds or milliseconds, as the file gives them (a time set in code
    /// may be any `Double`: out of `Int`'s range, converting would trap).
    private static func whole(_ value: Double) -> String {
        let rounded = value.rounded()
        return rounded.isFinite && abs(rounded) < 1e18 ? String(Int(rounded)) : "0"
    }

    /// Values from `COUCHETTE_<SECTION>__<KEY>` variables (`COUCHETTE_COUCHDB__MAX_DOCUMENT_SIZE=...`):
    /// section and key lowercased, except admin names, kept as written.
    public static func environmentEntries(_ environment: [String: String]) -> [ConfigurationFile.Entry] {
        environment.keys.sorted().compactMap { name -> ConfigurationFile.Entry? in
            guard name.hasPrefix("COUCHETTE_"), let value = environment[name] else { return nil }
            let rest = name.dropFirst("COUCHETTE_".count)
            guard let separator = rest.range(of: "__") else { return nil }
            let section = rest[..<separator.lowerBound].lowercased()
            let rawKey = String(rest[separator.upperBound...])
            guard !section.isEmpty, !rawKey.isEmpty else { return nil }
            return ConfigurationFile.Entry(section: section, key: section == "admins" ? rawKey : rawKey.lowercased(), value: value)
        }
    }
}
