import ArgumentParser
import CouchServer
import CouchStore
import Dispatch
import Foundation
import Logging

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the databases of a data directory over HTTP.",
        discussion: """
            With no server admin, every client is an admin (CouchDB's "admin party"): allowed on \
            127.0.0.1 only. Admins given with --admin or in --config are stored hashed (PBKDF2-SHA256) \
            in the data directory and need not be given again. So that no password shows in the \
            process list, admins may also come from the COUCHETTE_ADMIN environment variable \
            (NAME:PASSWORD) or from --admin-file (one NAME:PASSWORD per line).
            The data directory and every file in it are created readable by their owner only.

            Configuration, strongest first: these options; COUCHETTE_<SECTION>__<KEY> environment \
            variables (COUCHETTE_COUCHDB__MAX_DOCUMENT_SIZE=1000000, COUCHETTE_ADMINS__alice=secret); \
            DATA-DIR/local.ini (written by PUT /_node/_local/_config/SECTION/KEY); the --config file; \
            CouchDB's defaults. A value set through /_node/_local/_config takes effect at once.

            Admins and users are described in docs/security.md, running it for real in \
            docs/operations.md. See docs/configuration.md.
            """)

    @Option(help: "TCP port to listen on (default 5984); 0 picks a free port and prints it.")
    var port: Int?

    @Option(help: "IPv4 address to bind (default 127.0.0.1, this machine only). Any other needs a server admin.")
    var bind: String?

    @Option(name: .customLong("data-dir"), help: "Directory holding one SQLite file per database; created if missing.")
    var dataDirectory = "./data"

    @Option(help: "HTTP worker threads (requests handled at once; default 16).")
    var threads: Int?

    @Option(name: .customLong("log-level"), help: "debug, info, notice, warning, error or critical (default info).")
    var logLevel: String?

    @Option(name: .customLong("config"),
            help: "A CouchDB-style ini file ([chttpd], [couchdb], [chttpd_auth], [cors], [admins]...). Passwords in clear in its [admins] are replaced by their hashes, as CouchDB does.")
    var configFile: String?

    @Option(name: .customLong("admin"), parsing: .singleValue,
            help: "A server admin, NAME:PASSWORD; repeatable. Stored hashed; the password is never logged.")
    var admins: [String] = []

    @Option(name: .customLong("admin-file"),
            help: "A file of server admins, one NAME:PASSWORD per line (keeps passwords out of the process list).")
    var adminFile: String?

    @Option(name: .customLong("cors-origins"),
            help: "Comma-separated origins allowed to call from a browser (https://example.com), or *. CORS is off by default.")
    var corsOrigins: String?

    @Flag(name: .customLong("cors-credentials"), help: "Let allowed origins send cookies and Authorization.")
    var corsCredentials = false

    @Option(name: .customLong("session-timeout"), help: "Seconds a session cookie lives (default 600).")
    var sessionTimeout: Int?

    @Flag(name: .customLong("require-valid-user"), help: "Refuse anonymous requests (except logging in).")
    var requireValidUser = false

    @Option(name: .customLong("max-document-size"), help: "Largest document in bytes (default 8000000).")
    var maximumDocumentSize: Int?

    @Option(name: .customLong("max-request-size"), help: "Largest request body kept in memory, in bytes (default 64 MiB).")
    var maximumRequestSize: Int?

    @Option(name: .customLong("max-connections"), help: "Concurrent connections accepted (default 8192).")
    var maximumConnections: Int?

    @Option(name: .customLong("idle-timeout"), help: "Seconds before an idle connection is closed (default 300; feeds waiting for changes excepted).")
    var idleTimeout: Int?

    @Option(name: .customLong("public-dir"),
            help: "The admin page's files, served at /_utils/ (default: Public/ next to the binary, ../share/couchette/Public, or the source tree's).")
    var publicDirectory: String?

    func validate() throws {
        // The ranges `_config` and the ini files are held to.
        let settings: [(option: String, section: String, key: String, value: String?)] = [
            ("--port", "chttpd", "port", port.map(String.init)), ("--bind", "chttpd", "bind_address", bind),
            ("--threads", "couchette", "threads", threads.map(String.init)),
            ("--session-timeout", "chttpd_auth", "timeout", sessionTimeout.map(String.init)),
            ("--max-document-size", "couchdb", "max_document_size", maximumDocumentSize.map(String.init)),
            ("--max-request-size", "chttpd", "max_http_request_size", maximumRequestSize.map(String.init)),
            ("--max-connections", "couchette", "max_connections", maximumConnections.map(String.init)),
            ("--idle-timeout", "couchette", "idle_timeout", idleTimeout.map(String.init)),
        ]
        for setting in settings {
            guard let value = setting.value else { continue }
            do {
                try ServerConfiguration.check(section: setting.section, key: setting.key, value: value)
            } catch {
                throw ValidationError("\(setting.option): \(error)")
            }
        }
        if let logLevel, LogLevelControl.level(named: logLevel) == nil {
            throw ValidationError("unknown --log-level \(logLevel)")
        }
        for admin in admins where AdminEntry(commandLine: admin) == nil {
            // Never echo the value: it holds a password.
            throw ValidationError("--admin takes NAME:PASSWORD (a name without =, [, ] or ;, and a non-empty password)")
        }
    }

    func run() throws {
        StandardErrorLogging.bootstrap(level: logLevel.flatMap(LogLevelControl.level(named:)) ?? .info)
        let logger = Logger(label: "couchette")
        // Databases, blobs and _users' password hashes are for this user's eyes only.
        umask(0o077)
        // Enough for every busy thread to have its own: with 4, a `_bulk_docs` writer and the
        // worker preparing its chunks shared one in some runs, and the load went 30% slower.
        MemoryRelease.limitArenas(to: 64)
        // Above the ~1 MiB of a replication batch or a `_bulk_docs` body (buffers doubling to 2):
        // mapped afresh for each request, those cost a page fault per 4 KB, 8% of a replicating
        // server's CPU with 256 KB here. Listings of many megabytes still go back when freed.
        MemoryRelease.returnLargeBlocks(from: 4 << 20)
        var configuration = try serverConfiguration(logger: logger)
        DescriptorLimit.apply(to: &configuration.listener, logger: logger)
        let databases = try DatabaseManager(directory: dataDirectory)
        let server = try CouchServer(databases: databases, configuration: configuration)
        if server.isAdminParty {
            logger.warning("""
                NO SERVER ADMIN IS CONFIGURED: every client is an admin (CouchDB's "admin party"). \
                Allowed only because Couchette listens on \(server.configuration.listener.bindAddress); \
                any program on this machine, and \(server.configuration.cors.originsDescription), may read and \
                write every database. Create an admin with --admin NAME:PASSWORD.
                """)
        }
        // The listener takes what is in force, `local.ini` included.
        let listener = Listener(configuration: server.configuration.listener, handler: server)
        // Signals are caught before the banner announces the server, so a parent that
        // stops it as soon as it is up is never ignored.
        // A file that reaches the process's size limit (RLIMIT_FSIZE) must fail its write
        // (EFBIG, answered 507 like a full disk), not kill the server.
        signal(SIGXFSZ, SIG_IGN)
        ShutdownSignals.install { signal in
            // Replications first (their last checkpoint may go through this listener), then
            // the requests in flight finish and feeds end, then the daemon and databases close.
            logger.info("received \(signal), stopping")
            server.shutdown()
            listener.drain()
            listener.stop()
            databases.updates.flush()
            databases.ownership.withdraw()
            logger.info("stopped")
        }
        try listener.start()
        // Dispatch opens the main queue's eventfd on first use (dispatchMain's included) and
        // crashes if it cannot: opened now, before anyone can lower the descriptor limit.
        DispatchQueue.main.async {}
        // Written unbuffered, so a parent process reading the chosen port sees it at once.
        let address = server.configuration.listener.bindAddress
        // Tools run on this data directory find the server here (and go through it).
        let local = address == "0.0.0.0" ? "127.0.0.1" : address == "::" ? "[::1]" : address.contains(":") ? "[\(address)]" : address
        databases.ownership.publish(address: "http://\(local):\(listener.port)/")
        let banner = "Couchette \(ServerInfo.version) listening on http://\(address):\(listener.port)/ (data in \(dataDirectory))\n"
        FileHandle.standardOutput.write(Data(banner.utf8))
        logger.info("listening on \(address):\(listener.port)")
        if let publicDirectory = server.publicDirectory {
            logger.info("admin page at http://\(address):\(listener.port)/_utils/ (files from \(publicDirectory))")
        } else {
            logger.warning("no admin page: no Public/ directory found; give one with --public-dir")
        }
        dispatchMain()
    }

    /// `COUCHETTE_ADMIN` and `--admin-file`: admins whose passwords never appear in `/proc/PID/cmdline`.
    private func environmentAndFileAdmins() throws -> [AdminEntry] {
        var lines: [(String, String)] = []
        if let value = ProcessInfo.processInfo.environment["COUCHETTE_ADMIN"], !value.isEmpty {
            lines.append(("COUCHETTE_ADMIN", value))
        }
        if let adminFile {
            guard let text = try? String(contentsOfFile: adminFile, encoding: .utf8) else {
                throw ValidationError("cannot read --admin-file \(adminFile)")
            }
            for (number, line) in text.split(separator: "\n").enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if !trimmed.isEmpty, !trimmed.hasPrefix("#") { lines.append(("\(adminFile) line \(number + 1)", trimmed)) }
            }
        }
        return try lines.map { origin, value in
            // Never echo the value: it holds a password.
            guard let entry = AdminEntry(commandLine: value) else { throw ValidationError("\(origin) must be NAME:PASSWORD") }
            return entry
        }
    }

    /// Defaults, then the configuration file, then `COUCHETTE_*` variables, then
    /// command-line options (the data directory's `local.ini` is read by the server, under
    /// the last two).
    private func serverConfiguration(logger: Logger) throws -> ServerConfiguration {
        var configuration = ServerConfiguration()
        if let configFile {
            try configuration.apply(ConfigurationFile(contentsOf: configFile))
            if try ConfigurationFile.hashAdminPasswords(in: configFile, iterations: configuration.authentication.iterations) {
                logger.notice("replaced the admin passwords in \(configFile) by their hashes")
                configuration.authentication.admins = []
                try configuration.apply(ConfigurationFile(contentsOf: configFile))
            }
        }
        let environment = ServerConfiguration.environmentEntries(ProcessInfo.processInfo.environment)
        try configuration.apply(ConfigurationFile(entries: environment))
        var pinned = Set(environment.map { $0.section + "/" + $0.key })
        func pin(_ given: Any?, _ key: String) { if given != nil { pinned.insert(key) } }
        pin(port, "chttpd/port")
        pin(bind, "chttpd/bind_address")
        pin(threads, "couchette/threads")
        pin(corsOrigins, "cors/origins")
        pin(corsCredentials ? true : nil, "cors/credentials")
        pin(sessionTimeout, "chttpd_auth/timeout")
        pin(requireValidUser ? true : nil, "chttpd/require_valid_user")
        pin(maximumDocumentSize, "couchdb/max_document_size")
        pin(maximumRequestSize, "chttpd/max_http_request_size")
        pin(maximumConnections, "couchette/max_connections")
        pin(idleTimeout, "couchette/idle_timeout")
        pin(logLevel, "log/level")
        pin(publicDirectory, "couchette/public_dir")
        configuration.pinnedKeys = pinned
        if let logLevel { configuration.logLevel = logLevel }
        if let port { configuration.listener.port = port }
        if let bind { configuration.listener.bindAddress = bind }
        if let threads { configuration.listener.threadCount = threads }
        configuration.authentication.admins += try environmentAndFileAdmins() + admins.compactMap(AdminEntry.init(commandLine:))
        if let corsOrigins {
            configuration.cors.origins = corsOrigins.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        }
        if corsCredentials { configuration.cors.credentials = true }
        if let sessionTimeout { configuration.authentication.sessionTimeout = sessionTimeout }
        if requireValidUser { configuration.authentication.requireValidUser = true }
        if let maximumDocumentSize { configuration.maximumDocumentSize = maximumDocumentSize }
        if let maximumRequestSize { configuration.listener.maximumBodySize = maximumRequestSize }
        if let maximumConnections { configuration.listener.connectionLimit = maximumConnections }
        if let idleTimeout { configuration.listener.idleTimeoutSeconds = idleTimeout }
        if let publicDirectory { configuration.publicDirectory = publicDirectory }
        try configuration.validate()
        return configuration
    }
}
