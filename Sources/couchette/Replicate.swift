import ArgumentParser
import CouchCore
import CouchFunctions
import CouchReplication
import CouchStore
import Dispatch
import Foundation
import Logging

/// `couchette replicate SOURCE TARGET`: one replication run in this process, as
/// `POST /_replicate` would run it, with a progress bar on a terminal.
struct Replicate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replicate a database into another, as POST /_replicate does.",
        discussion: """
            SOURCE and TARGET are database names in --data-dir or URLs (http://user:password@host:5984/db). \
            A one-shot replication prints CouchDB's result when done; a continuous one runs until \
            interrupted (Ctrl-C stops it after a last checkpoint). Passwords are never printed.
            See docs/replication.md.
            """)

    @Argument(help: "The database to copy from: a name in --data-dir or a URL.")
    var source: String

    @Argument(help: "The database to copy into: a name in --data-dir or a URL.")
    var target: String

    @Flag(help: "Keep copying new changes until interrupted.")
    var continuous = false

    @Flag(name: .customLong("create-target"), help: "Create the target database if it does not exist.")
    var createTarget = false

    @Option(help: "A filter function of the source, DDOC/NAME.")
    var filter: String?

    @Option(name: .customLong("query-param"), parsing: .singleValue, help: "KEY=VALUE for the filter; repeatable.")
    var queryParameters: [String] = []

    @Option(name: .customLong("doc-ids"), help: "Copy only these documents (comma-separated IDs).")
    var documentIDs: String?

    @Option(help: "Copy only the documents this Mango selector (JSON) matches.")
    var selector: String?

    @Option(help: """
        Rewrite each document on its way: DDOC/NAME of a function in the `transforms` of the local \
        database's design document _design/DDOC (or a transform an embedding application registered).
        """)
    var transform: String?

    @Option(help: """
        all (the default) or on_demand: a pull into a database of the server keeps only the \
        attachments' metadata, and the server fetches each body from the source when it is first read. \
        Needs a server (--server, or the one serving --data-dir), which keeps the replication as the \
        _replicator document --id, so it knows where the bodies are.
        """)
    var attachments: String?

    @Option(help: "The _replicator document an --attachments on_demand replication is saved as (default: cli-SOURCE-TARGET).")
    var id: String?

    @Option(name: .customLong("data-dir"), help: "Where local databases live.")
    var dataDirectory = "./data"

    @Option(name: .customLong("ca-file"), help: "PEM file of the certificate authorities to trust for HTTPS peers.")
    var caFile: String?

    @Option(name: .customLong("pin"), help: "Pin the HTTPS peers' public key (sha256//BASE64, or a key file).")
    var pinnedPublicKey: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "warning"

    @Flag(name: .customLong("no-progress"), help: "No progress bar, even on a terminal.")
    var noProgress = false

    @Flag(help: "Show progress even when standard error is not a terminal (one line per update).")
    var progress = false

    @Option(help: """
        Run the replication on this server (http://user:password@host:5984) rather than here: \
        SOURCE and TARGET are then its database names or URLs, and progress comes from its live event feed.
        """)
    var server: String?

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        if selector != nil, (try? JSONValue.parse(selector!)) == nil { throw ValidationError("--selector must be JSON") }
        if let attachments, !["all", "on_demand"].contains(attachments) {
            throw ValidationError("--attachments takes all or on_demand")
        }
        if id != nil, !savesDocument { throw ValidationError("--id names the document of an --attachments on_demand replication") }
        for parameter in queryParameters where !parameter.contains("=") {
            throw ValidationError("--query-param takes KEY=VALUE")
        }
    }

    /// The `_replicate` body this command stands for.
    func body() throws -> JSONObject {
        func peer(_ text: String) -> JSONValue {
            guard text.hasPrefix("http://") || text.hasPrefix("https://") else { return JSONValue(text) }
            var object: JSONObject = ["url": JSONValue(text)]
            if let caFile { object["ca_file"] = JSONValue(caFile) }
            if let pinnedPublicKey { object["pinned_public_key"] = JSONValue(pinnedPublicKey) }
            return .object(object)
        }
        var body: JSONObject = ["source": peer(source), "target": peer(target)]
        if continuous { body["continuous"] = true }
        if createTarget { body["create_target"] = true }
        if let filter {
            body["filter"] = JSONValue(filter)
            var parameters = JSONObject()
            for parameter in queryParameters {
                let parts = parameter.split(separator: "=", maxSplits: 1)
                parameters[String(parts[0])] = JSONValue(parts.count > 1 ? String(parts[1]) : "")
            }
            body["query_params"] = .object(parameters)
        }
        if let documentIDs {
            body["doc_ids"] = .array(documentIDs.split(separator: ",").map { JSONValue(String($0)) })
        }
        if let selector { body["selector"] = try JSONValue.parse(selector) }
        if let transform { body["transform"] = JSONValue(transform) }
        if let attachments { body["attachments"] = JSONValue(attachments) }
        return body
    }

    /// On-demand bodies are fetched long after the run, from the source a `_replicator`
    /// document names: such a replication is saved as one rather than run once.
    private var savesDocument: Bool { attachments == "on_demand" }

    /// The `_replicator` document's ID: given, or made of the two names.
    private var documentID: String {
        if let id { return id }
        func name(_ text: String) -> String {
            let last = text.split(separator: "/").last.map(String.init) ?? text
            return String(last.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" })
        }
        return "cli-\(name(source))-\(name(target))"
    }

    func run() throws {
        StandardErrorLogging.bootstrap(level: Logger.Level(rawValue: logLevel) ?? .warning)
        if let server {
            try runOnServer(server)
            return
        }
        let settings: ReplicationSettings
        do {
            settings = try ReplicationSettings(json: try body())
        } catch let error as ReplicationError {
            throw ValidationError(error.reason)
        }
        let manager: ReplicationManager
        do {
            manager = try makeManager(for: settings)
        } catch let inUse as DataDirectoryLock.InUse {
            // A server has the directory: the replication runs there, never beside it.
            guard let address = inUse.address else { throw ValidationError(DataDirectory.refusal(inUse) { _ in "" }) }
            FileHandle.standardError.write(Data("\(inUse): replicating through it\n".utf8))
            try runOnServer(address, discovered: true)
            return
        }
        if savesDocument {
            throw ValidationError("""
                --attachments on_demand needs a server to fetch each body when it is read: \
                start couchette serve on \(dataDirectory), or give --server
                """)
        }
        let showProgress = !noProgress && isatty(STDERR_FILENO) == 1
        let finished = DispatchSemaphore(value: 0)
        let outcomeBox = OutcomeBox()
        let started = Date()

        ReplicationTasks.task {
            do {
                let job = try await manager.start(settings)
                outcomeBox.job = job
                job.whenFinished { outcome in
                    outcomeBox.outcome = outcome
                    finished.signal()
                }
            } catch {
                outcomeBox.outcome = .failed(error as? ReplicationError ?? ReplicationError(.unknown, "\(error)"))
                finished.signal()
            }
        }
        ShutdownSignals.onSignal { _ in
            FileHandle.standardError.write(Data("\nstopping after a last checkpoint...\n".utf8))
            outcomeBox.job?.cancel()
            if outcomeBox.job == nil { Foundation.exit(130) }
        }
        while finished.wait(timeout: .now() + .milliseconds(showProgress ? 200 : 1000)) == .timedOut {
            if showProgress, let status = outcomeBox.job?.status { ProgressBar.draw(status, since: started) }
        }
        if showProgress, let status = outcomeBox.job?.status {
            ProgressBar.draw(status, since: started)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        switch outcomeBox.outcome {
        case .completed(let log)?:
            var result: JSONObject = ["ok": true]
            for (key, value) in log { result[key] = value }
            print(JSONValue.object(result).serializedString())
        case .failed(let error)?:
            print(error.json.serializedString())
            throw ExitCode(1)
        case .cancelled?:
            print(#"{"ok":true,"cancelled":true}"#)
        case nil:
            throw ExitCode(1)
        }
    }

    /// `--server`: `POST /_replicate` there, progress from its event feed, its answer printed.
    private func runOnServer(_ server: String, discovered: Bool = false) throws {
        let output: ServerReplication.ProgressOutput? = noProgress ? nil
            : isatty(STDERR_FILENO) == 1 ? .terminal : progress ? .lines : nil
        let replication: ServerReplication
        do {
            replication = try ServerReplication(server: server, body: try body(), progress: output,
                                                savedAs: savesDocument ? documentID : nil)
        } catch let error as ServerReplicationError {
            throw ValidationError(error.description)
        }
        let (status, answer) = try replication.run()
        print(String(decoding: answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        if discovered && status == 401 {
            let credentials = server.replacingOccurrences(of: "://", with: "://NAME:PASSWORD@")
            FileHandle.standardError.write(Data("that server needs an admin: couchette replicate --server \(credentials) ...\n".utf8))
        }
        if status < 200 || status >= 300 { throw ExitCode(1) }
    }

    /// Local databases when a name is given (or the data directory exists); the server
    /// UUID that enters the replication ID comes from there too, so that a later run
    /// finds this one's checkpoints.
    private func makeManager(for settings: ReplicationSettings) throws -> ReplicationManager {
        let usesLocal = [settings.source, settings.target].contains { if case .local = $0 { true } else { false } }
        if usesLocal || FileManager.default.fileExists(atPath: dataDirectory) {
            let databases = try DatabaseManager(directory: dataDirectory)
            return ReplicationManager(serverUUID: databases.serverUUID, databases: databases,
                                      functions: FunctionRuntime())
        }
        let host = ProcessInfo.processInfo.hostName
        return ReplicationManager(serverUUID: Digest.hex(Digest.md5(Array("couchette-cli:\(host)".utf8))), databases: nil)
    }
}

/// What the waiting main thread and the replication's task share.
private final class OutcomeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var storedJob: Replication?
    private var storedOutcome: Replication.Outcome?

    var job: Replication? {
        get { lock.withLock { storedJob } }
        set { lock.withLock { storedJob = newValue } }
    }

    var outcome: Replication.Outcome? {
        get { lock.withLock { storedOutcome } }
        set { lock.withLock { storedOutcome = newValue } }
    }
}

/// One line redrawn in place: `[#####-----]  52%  5200/10000 changes  5100 written  1843/s  active`.
enum ProgressBar {
    static func draw(_ status: ReplicationStatus, since start: Date) {
        let width = 30
        let total = max(status.total, status.completed)
        let fraction = total > 0 ? Double(status.completed) / Double(total) : (status.state == .idle ? 1 : 0)
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
        let elapsed = max(0.001, Date().timeIntervalSince(start))
        let rate = Int(Double(status.statistics.docsWritten) / elapsed)
        var line = "\r[\(bar)] \(String(format: "%3d", Int(fraction * 100)))%  \(status.completed)/\(total) changes  "
            + "\(status.statistics.docsWritten) written  \(rate)/s  \(status.state.rawValue)"
        if status.statistics.docWriteFailures > 0 { line += "  \(status.statistics.docWriteFailures) failed" }
        if let error = status.lastError, status.state == .offline || status.state == .crashing {
            line += "  (\(error.reason))"
        }
        FileHandle.standardError.write(Data((line + "\u{1B}[K").utf8))
    }
}
