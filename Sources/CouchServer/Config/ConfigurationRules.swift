/// What a configuration may hold, checked where a value comes in (`PUT /_node/_local/_config`,
/// the data directory's `local.ini` at start, `--config`, `COUCHETTE_*`), so that no value can
/// stop the server from starting, crash it, or lock its admins out of `_config`:
/// - section and key names as CouchDB accepts them (printable, no `[` or `]`), and as the ini
///   file can read them back (no `=` in a key, no comment mark first, no surrounding blanks);
/// - values on one line, with no control character but tabs;
/// - for every key Couchette reads, a type and a range;
/// - keys naming files or directories are not taken from `_config` or from `local.ini`, which
///   `_config` writes: an admin's HTTP request must not point the server at `/etc`.
///
/// Needs nothing but the standard library (the `config` fuzz target compiles it alone).
enum ConfigurationRules {
    enum Kind: Equatable, Sendable {
        case integer(ClosedRange<Int>)
        case boolean
        /// One of these words, in any case.
        case choice([String])
        /// Any one line (header values, comma-separated lists).
        case text
        /// Dotted-decimal IPv4 (the listener binds IPv4 only).
        case ipv4Address
        /// A file or directory: read from `--config`, the command line or the environment only.
        case path
    }

    static let invalidSection = "Invalid configuration section"
    static let invalidKey = "Invalid configuration key"
    static let invalidValue = "Invalid configuration value"

    /// The type of a key Couchette reads; nil for the others (kept and shown as given).
    static func kind(section: String, key: String) -> Kind? {
        keys[aliases[section] ?? section]?[key]
    }

    /// Whether a value for this key names a file or directory (Couchette's or CouchDB's own).
    static func isPath(section: String, key: String) -> Bool {
        kind(section: section, key: key) == .path || couchDBPaths.contains(section + "/" + key)
    }

    /// A section's name, as CouchDB's `config:validate_config_update` and our ini reader accept it.
    static func checkSection(_ name: String) throws(ConfigurationError) {
        guard isName(name, in: .section) else { throw ConfigurationError(invalidSection) }
    }

    static func checkKey(_ name: String) throws(ConfigurationError) {
        guard isName(name, in: .key) else { throw ConfigurationError(invalidKey) }
    }

    /// One line of printable text (tabs allowed).
    /// A value may not start with `;` either: written after `key = `, that would start a comment.
    static func checkValue(_ value: String) throws(ConfigurationError) {
        guard value.unicodeScalars.allSatisfy(isPrintable), value.unicodeScalars.first != ";",
              !startsInlineComment(value) else {
            throw ConfigurationError(invalidValue)
        }
    }

    /// Whether the text holds what the ini reader takes for an in-line comment (a `;` after a
    /// space or tab), so that it would not read back as written. By scalars, as the reader
    /// reads: a combining mark after `;` does not hide it.
    static func startsInlineComment(_ text: String) -> Bool {
        var previous: Unicode.Scalar?
        for scalar in text.unicodeScalars {
            if scalar == ";", previous == " " || previous == "\t" { return true }
            previous = scalar
        }
        return false
    }

    /// Names, the value's characters, and the type and range of the keys Couchette reads.
    static func check(section: String, key: String, value: String) throws(ConfigurationError) {
        try checkSection(section)
        try checkKey(key)
        try checkValue(value)
        guard let kind = kind(section: section, key: key) else { return }
        if let problem = problem(of: value, as: kind) {
            throw ConfigurationError("[\(section)] \(key) \(problem), not \"\(value)\"")
        }
    }

    /// The integer a value `check` accepted for an integer key holds (decimal digits, an
    /// optional `-`: no `+`, no blanks, as Swift's `Int.init` would also take).
    static func integer(_ value: String) -> Int? {
        let digits = value.first == "-" ? value.dropFirst() : Substring(value)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(value)
    }

    static func boolean(_ value: String) -> Bool? {
        switch value.lowercased() {
        case "true": true
        case "false": false
        default: nil
        }
    }

    // MARK: - Types

    private static func problem(of value: String, as kind: Kind) -> String? {
        switch kind {
        case .integer(let range):
            guard let number = integer(value), range.contains(number) else {
                return "must be an integer from \(range.lowerBound) to \(range.upperBound)"
            }
        case .boolean:
            if boolean(value) == nil { return "must be true or false" }
        case .choice(let words):
            if !words.contains(value.lowercased()) { return "must be one of " + words.joined(separator: ", ") }
        case .text:
            break
        case .ipv4Address:
            if !isIPv4(value) { return "must be an IPv4 address" }
        case .path:
            break
        }
        return nil
    }

    private static func isIPv4(_ text: String) -> Bool {
        let octets = text.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets.allSatisfy { octet in
            (1...3).contains(octet.count) && octet.utf8.allSatisfy { $0 >= 48 && $0 <= 57 }
                && (octet.count == 1 || octet.first != "0") && Int(octet)! <= 255
        }
    }

    private enum NamePlace { case section, key }

    private static func isName(_ name: String, in place: NamePlace) -> Bool {
        guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last,
              !isBlank(first), !isBlank(last) else { return false }
        if place == .key, first == ";" || first == "#" { return false }
        if startsInlineComment(name) { return false }
        return name.unicodeScalars.allSatisfy { scalar in
            isPrintable(scalar) && scalar != "[" && scalar != "]" && (place == .section || scalar != "=")
        }
    }

    private static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || !(scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}")
    }

    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.isWhitespace }

    // MARK: - The keys Couchette reads

    /// Sections read under two names, as CouchDB reads them.
    private static let aliases = ["couch_httpd_auth": "chttpd_auth"]

    private static let seconds = 1...2_147_483_647
    private static let bytes = 1...(1 << 53)
    private static let count = 0...1_000_000

    /// Read from `[chttpd]` and from CouchDB 1's `[httpd]`.
    private static let http: [String: Kind] = [
        "port": .integer(0...65535), "bind_address": .ipv4Address, "max_http_request_size": .integer(bytes),
        "enable_cors": .boolean, "WWW-Authenticate": .text, "x_forwarded_host": .text, "allow_jsonp": .boolean,
    ]

    private static let keys: [String: [String: Kind]] = [
        "chttpd": http.merging(["require_valid_user": .boolean, "require_valid_user_except_for_up": .boolean]) { $1 },
        "httpd": http,
        "chttpd_auth": [
            "timeout": .integer(seconds), "iterations": .integer(1...1_000_000_000),
            "min_iterations": .integer(1...1_000_000_000), "max_iterations": .integer(1...1_000_000_000),
            "allow_persistent_cookies": .boolean, "same_site": .choice(["", "none", "lax", "strict"]),
            "require_valid_user": .boolean, "require_valid_user_except_for_up": .boolean,
        ],
        "couchdb": [
            "max_document_size": .integer(bytes), "max_dbs_open": .integer(1...1_000_000),
            "maintenance_mode": .choice(["true", "false", "nolb"]),
            "default_security": .choice(["admin_only", "everyone", "admin_local"]),
            "users_db_security_editable": .boolean, "max_partition_size": .integer(0...(1 << 53)),
        ],
        "cors": [
            "origins": .text, "credentials": .boolean, "methods": .text, "headers": .text, "exposed_headers": .text,
            "max_age": .integer(0...2_147_483_647),
        ],
        "couchette": [
            // Enough connections, URL and header room that an admin can always reach `_config`.
            "threads": .integer(1...1024), "max_connections": .integer(16...1_000_000),
            "idle_timeout": .integer(seconds), "header_timeout": .integer(1...86400), "body_timeout": .integer(1...86400),
            "body_min_rate": .integer(1...2_147_483_647), "max_connections_per_address": .integer(1...1_000_000),
            "max_url_length": .integer(1024...1_048_576), "max_header_size": .integer(1024...1_048_576),
            "function_memory_limit": .integer((16 << 20)...(1 << 40)), "public_dir": .path, "codemirror_dir": .path,
        ],
        "log": ["level": .choice(["debug", "trace", "info", "notice", "warning", "warn", "error", "err",
                                  "critical", "crit", "alert", "emergency", "none"])],
        // Milliseconds: an Erlang timeout's range, as CouchDB's.
        "query_server_config": ["os_process_timeout": .integer(1...4_294_967_295),
                                "partition_query_limit": .integer(1...1_000_000_000)],
        "replicator": ["max_jobs": .integer(count), "interval": .integer(1...4_294_967_295), "max_churn": .integer(count)],
        // A level outside 1–9 stores attachments as sent, as CouchDB takes it.
        "attachments": ["compressible_types": .text, "compression_level": .integer(-1_000_000...1_000_000)],
    ]

    /// CouchDB's keys that name files or directories (Couchette reads none of them).
    private static let couchDBPaths: Set<String> = [
        "couchdb/database_dir", "couchdb/view_index_dir", "couchdb/util_driver_dir", "couchdb/uri_file",
        "log/file", "ssl/cert_file", "ssl/key_file", "ssl/cacert_file",
    ]
}
