import CouchCore
import CouchFunctions
import CouchReplication

/// Everything a server can be told, in one place: the listener (address, port, threads
/// and connection limits), document size, authentication and CORS. Filled from defaults
/// (CouchDB 3's), then an ini file in CouchDB's `local.ini` terms, then command-line flags.
public struct ServerConfiguration: Sendable {
    /// Address, port, threads, and the limits enforced per connection: request body,
    /// URL and header sizes, concurrent connections, idle timeout.
    public var listener = ListenerConfiguration()
    /// CouchDB's `[couchdb] max_document_size` (bytes of a document's JSON): larger
    /// documents are refused with 413 `document_too_large`.
    public var maximumDocumentSize = 8_000_000
    /// CouchDB's `[couchdb] max_dbs_open`: databases kept open at once (idle ones beyond it are closed).
    public var maximumOpenDatabases = 500
    /// `[couchdb] max_partition_size`: bytes of live bodies past which a partition refuses
    /// growing writes (403 `partition_overflow`); 0 for no limit. CouchDB's default, 10 GiB.
    public var maximumPartitionSize = 10_737_418_240
    /// `[attachments] compressible_types` and `compression_level`: attachments of these types
    /// are stored gzip-compressed, as CouchDB stores them.
    public var attachmentCompression = AttachmentCompression()
    /// `[query_server_config] partition_query_limit`: the most rows a partition query may ask for.
    public var partitionQueryLimit = 2000
    /// `[chttpd] x_forwarded_host`: the header naming the host a proxy was asked for (`Location`).
    public var forwardedHostHeader = "X-Forwarded-Host"
    /// `[chttpd] allow_jsonp`: `?callback=name` wraps JSON answers in a call (off, as in CouchDB).
    public var allowJSONP = false
    /// `[couchdb] maintenance_mode`: `true` or `nolb` make `/_up` answer 404.
    public var maintenanceMode = "false"
    public var authentication = AuthenticationConfiguration()
    public var cors = CORSConfiguration()
    /// `[log] level`: debug, info, notice, warning, error, critical (CouchDB's names).
    public var logLevel = "info"
    /// Entries of the files read that Couchette does not interpret, shown by `_config` as given.
    public var otherEntries: [ConfigurationFile.Entry] = []
    /// `section/key` of values given on the command line or in `COUCHETTE_*` variables:
    /// at start they win over the data directory's `local.ini`.
    public var pinnedKeys: Set<String> = []
    /// Design-document functions' limits: `[query_server_config] os_process_timeout`
    /// (milliseconds in the file, 5000) and `[couchette] function_memory_limit` (bytes of heap).
    public var functions = FunctionLimits()
    /// CouchDB's `[replicator]` `max_jobs`, `interval` (ms) and `max_churn`.
    public var replicator = ReplicationScheduler.Configuration()
    /// `[couchette] public_dir` (`--public-dir`): the admin page's files, served at `/_utils/`;
    /// nil looks for them where `PublicDirectory` says. Read at start.
    public var publicDirectory: String?

    public init() {}

    /// Whether the listener only accepts connections from this machine (127.0.0.0/8).
    public var isLoopbackOnly: Bool {
        let octets = listener.bindAddress.split(separator: ".")
        return octets.count == 4 && octets[0] == "127"
    }

    /// Whether a value is one Couchette accepts for `[section] key` (see `ConfigurationRules`).
    public static func check(section: String, key: String, value: String) throws(ConfigurationError) {
        try ConfigurationRules.check(section: section, key: key, value: value)
    }

    public func validate() throws(ConfigurationError) {
        try cors.validate()
        guard authentication.iterations > 0 else { throw ConfigurationError("iterations must be positive") }
        guard authentication.minimumIterations > 0, authentication.minimumIterations <= authentication.maximumIterations else {
            throw ConfigurationError("min_iterations must be positive and at most max_iterations")
        }
        guard authentication.sessionTimeout > 0 else { throw ConfigurationError("the session timeout must be positive") }
        guard maximumDocumentSize > 0 else { throw ConfigurationError("max_document_size must be positive") }
        guard replicator.maxJobs >= 0, replicator.maxChurn >= 0,
              (1...ChangesOptions.longestWait).contains(replicator.intervalMilliseconds) else {
            throw ConfigurationError("[replicator] max_jobs and max_churn must not be negative, interval must be 1 to 4294967295 ms")
        }
    }
}

/// Who may log in and how (CouchDB's `[admins]`, `[chttpd_auth]` and `[couchdb]` security settings).
public struct AuthenticationConfiguration: Sendable {
    /// Admins to add (or whose password to replace) at start. Stored hashed in the data
    /// directory, so they need not be given again.
    public var admins: [AdminEntry] = []
    /// PBKDF2-SHA256 iterations for new password hashes (`[chttpd_auth] iterations`;
    /// CouchDB 3.4's default). Tests may lower it.
    public var iterations = 600_000
    /// The iterations a stored hash may have for a login to be tried (`min_iterations`,
    /// `max_iterations`; CouchDB's defaults).
    public var minimumIterations = 1
    public var maximumIterations = 1_000_000_000
    /// Seconds an `AuthSession` cookie lives (`[chttpd_auth] timeout`).
    public var sessionTimeout = 600
    /// Whether cookies carry `Max-Age`/`Expires` (`allow_persistent_cookies`).
    public var allowPersistentCookies = true
    /// `SameSite` attribute of the session cookie (`same_site`: none, lax or strict).
    public var cookieSameSite: String?
    /// Refuse anonymous requests (`require_valid_user`), except a login.
    public var requireValidUser = false
    public var requireValidUserExceptForUp = false
    /// A `WWW-Authenticate` value for every 401 (`[httpd] WWW-Authenticate`); CouchDB sends
    /// none by default, `Basic realm="server"` when `require_valid_user` is set.
    public var wwwAuthenticate: String?
    /// The security of databases that were never given one (`[couchdb] default_security`).
    public var defaultSecurity = DefaultSecurity.adminOnly
    /// `[couchdb] users_db_security_editable`.
    public var usersDatabaseSecurityEditable = false

    public enum DefaultSecurity: String, Sendable {
        /// CouchDB 3's default: only admins may use a database until its `_security` says otherwise.
        case adminOnly = "admin_only"
        /// CouchDB 2's: anyone may read and write non-design documents.
        case everyone
    }

    public init() {}
}

/// CouchDB's `[cors]` section. Off while `origins` is empty.
public struct CORSConfiguration: Sendable {
    /// Allowed origins (`https://example.com`), or `*` for any.
    public var origins: [String] = []
    /// Whether browsers may send cookies and `Authorization` (`Access-Control-Allow-Credentials`).
    public var credentials = false
    public var methods = ["CONNECT", "COPY", "DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT", "TRACE"]
    public var headers = ["accept", "accept-language", "authorization", "content-length", "content-range",
                          "content-type", "destination", "expires", "if-match", "last-modified", "origin",
                          "pragma", "x-couch-full-commit", "x-couch-id", "x-couch-persist",
                          "x-couchdb-www-authenticate", "x-http-method-override", "x-requested-with",
                          "x-couchdb-vhost-path"]
    public var exposedHeaders = ["accept-ranges", "etag", "server", "x-couch-request-id",
                                 "x-couch-update-newrev", "x-couchdb-body-time"]
    public var maxAge = 600

    public init() {}

    public var isEnabled: Bool { !origins.isEmpty }

    /// `origins = *` with `credentials = true` is accepted, as CouchDB's `chttpd_cors` accepts
    /// it (each page's own origin is echoed, never `*`); an empty origin is refused.
    /// Whether a value is one Couchette accepts for `[section] key` (see `ConfigurationRules`).
    public static func check(section: String, key: String, value: String) throws(ConfigurationError) {
        try ConfigurationRules.check(section: section, key: key, value: value)
    }

    public func validate() throws(ConfigurationError) {
        if origins.contains(where: { $0.allSatisfy { $0 == " " || $0 == "\t" } }) {
            throw ConfigurationError("CORS: an origin cannot be empty")
        }
    }

    /// Who may send requests from a browser, in words (for the admin-party warning).
    public var originsDescription: String {
        guard isEnabled else { return "no web page (CORS is off)" }
        if origins.contains("*") { return "pages from any origin" + (credentials ? " (with credentials)" : "") }
        return "pages from " + origins.joined(separator: ", ")
    }
}

extension ServerConfiguration {
    /// Applies a CouchDB-style ini file: `[chttpd]` (`port`, `bind_address`,
    /// `max_http_request_size`, `require_valid_user`), `[couchdb]` (`max_document_size`,
    /// `default_security`, `users_db_security_editable`), `[chttpd_auth]` or
    /// `[couch_httpd_auth]` (`timeout`, `iterations`, `allow_persistent_cookies`,
    /// `same_site`, `require_valid_user`), `[httpd]` (`WWW-Authenticate`, `enable_cors`),
    /// `[cors]` and `[admins]`, plus `[couchette]` for Couchette's own limits.
    /// Every entry is checked first (`ConfigurationRules`: names, values, and each key's type and
    /// range), so what follows reads only values it can use.
    public mutating func apply(_ file: ConfigurationFile) throws(ConfigurationError) {
        for entry in file.entries where entry.section != "admins" {
            try ConfigurationRules.check(section: entry.section, key: entry.key, value: entry.value)
        }
        func int(_ key: String, _ sections: String...) -> Int? {
            file.entries.last(where: { sections.contains($0.section) && $0.key == key }).flatMap { ConfigurationRules.integer($0.value) }
        }
        func bool(_ key: String, _ sections: String...) -> Bool? {
            file.entries.last(where: { sections.contains($0.section) && $0.key == key }).flatMap { ConfigurationRules.boolean($0.value) }
        }
        func list(_ text: String) -> [String] {
            text.split(separator: ",").map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
        }
        let auth = ["chttpd_auth", "couch_httpd_auth"]

        if let port = int("port", "chttpd", "httpd") { listener.port = port }
        if let address = file.value("bind_address", in: "chttpd", "httpd") { listener.bindAddress = address }
        if let size = int("max_http_request_size", "chttpd", "httpd") { listener.maximumBodySize = size }
        if let size = int("max_document_size", "couchdb") { maximumDocumentSize = size }
        if let mode = file.value("maintenance_mode", in: "couchdb") { maintenanceMode = mode.lowercased() }
        if let count = int("max_dbs_open", "couchdb") { maximumOpenDatabases = count }
        if let size = int("max_partition_size", "couchdb") { maximumPartitionSize = size }
        if let limit = int("partition_query_limit", "query_server_config") { partitionQueryLimit = limit }
        let compressibleTypes = file.value("compressible_types", in: "attachments")
        let compressionLevel = int("compression_level", "attachments")
        if compressibleTypes != nil || compressionLevel != nil {
            // A level outside 1–9 stores every attachment as sent, as in CouchDB.
            attachmentCompression = AttachmentCompression(types: compressibleTypes ?? attachmentCompression.types,
                                                          level: compressionLevel ?? attachmentCompression.level)
        }
        if let header = file.value("x_forwarded_host", in: "chttpd", "httpd") { forwardedHostHeader = header }
        if let allowed = bool("allow_jsonp", "chttpd", "httpd") { allowJSONP = allowed }
        if let threads = int("threads", "couchette") { listener.threadCount = threads }
        if let directory = file.value("public_dir", in: "couchette"), !directory.isEmpty { publicDirectory = directory }
        if let limit = int("max_connections", "couchette") { listener.connectionLimit = limit }
        if let seconds = int("idle_timeout", "couchette") { listener.idleTimeoutSeconds = seconds }
        if let seconds = int("header_timeout", "couchette") { listener.headerTimeoutSeconds = Double(seconds) }
        if let seconds = int("body_timeout", "couchette") { listener.bodyGraceSeconds = Double(seconds) }
        if let rate = int("body_min_rate", "couchette") { listener.minimumBodyRate = rate }
        if let count = int("max_connections_per_address", "couchette") { listener.maximumConnectionsPerAddress = count }
        if let size = int("max_url_length", "couchette") { listener.maximumURLLength = size }
        if let size = int("max_header_size", "couchette") { listener.maximumHeaderSize = size }
        if let milliseconds = int("os_process_timeout", "query_server_config") { functions.timeout = Double(milliseconds) / 1000 }
        if let bytes = int("function_memory_limit", "couchette") { functions.memory = bytes }
        if let jobs = int("max_jobs", "replicator") { replicator.maxJobs = jobs }
        if let interval = int("interval", "replicator") { replicator.intervalMilliseconds = interval }
        if let churn = int("max_churn", "replicator") { replicator.maxChurn = churn }

        if let text = file.value("default_security", in: "couchdb") {
            switch text.lowercased() {
            // As CouchDB 3 reads it for the (clustered) databases clients see: `admin_local`
            // restricts only node-local databases, which Couchette does not have.
            case "admin_only": authentication.defaultSecurity = .adminOnly
            default: authentication.defaultSecurity = .everyone   // everyone, admin_local
            }
        }
        if let editable = bool("users_db_security_editable", "couchdb") {
            authentication.usersDatabaseSecurityEditable = editable
        }
        if let seconds = int("timeout", auth[0], auth[1]) { authentication.sessionTimeout = seconds }
        if let count = int("iterations", auth[0], auth[1]) { authentication.iterations = count }
        if let count = int("min_iterations", auth[0], auth[1]) { authentication.minimumIterations = count }
        if let count = int("max_iterations", auth[0], auth[1]) { authentication.maximumIterations = count }
        if let persistent = bool("allow_persistent_cookies", auth[0], auth[1]) {
            authentication.allowPersistentCookies = persistent
        }
        if let sameSite = file.value("same_site", in: auth[0], auth[1]), !sameSite.isEmpty {
            authentication.cookieSameSite = sameSite
        }
        if let required = bool("require_valid_user", "chttpd", auth[0], auth[1]) {
            authentication.requireValidUser = required
        }
        if let exceptUp = bool("require_valid_user_except_for_up", "chttpd", auth[0], auth[1]) {
            authentication.requireValidUserExceptForUp = exceptUp
        }
        if let challenge = file.value("WWW-Authenticate", in: "httpd", "chttpd"), !challenge.isEmpty {
            authentication.wwwAuthenticate = challenge
        }
        for entry in file.entries(in: "admins") {
            authentication.admins.append(AdminEntry(name: entry.key, secret: entry.value))
        }

        let corsEnabled = bool("enable_cors", "chttpd", "httpd") ?? true
        if let origins = file.value("origins", in: "cors") { cors.origins = corsEnabled ? list(origins) : [] }
        if !corsEnabled { cors.origins = [] }
        if let credentials = bool("credentials", "cors") { cors.credentials = credentials }
        if let methods = file.value("methods", in: "cors") { cors.methods = list(methods) }
        if let headers = file.value("headers", in: "cors") { cors.headers = list(headers).map { $0.lowercased() } }
        if let exposed = file.value("exposed_headers", in: "cors") { cors.exposedHeaders = list(exposed).map { $0.lowercased() } }
        if let maxAge = int("max_age", "cors") { cors.maxAge = maxAge }
        if let level = file.value("level", in: "log") { logLevel = level }
        for entry in file.entries where !Self.isInterpreted(entry) {
            otherEntries.removeAll { $0.section == entry.section && $0.key == entry.key }
            otherEntries.append(entry)
        }
    }
}
