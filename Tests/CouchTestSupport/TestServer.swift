import CouchCore
import CouchServer
import CouchStore
import Foundation
import Logging

/// A real Couchette listening on an ephemeral loopback port, with its data in a fresh
/// temporary directory that is removed when the server stops.
public final class TestServer: @unchecked Sendable {
    public let directory: String
    public let databases: DatabaseManager
    public let listener: Listener
    public let server: CouchServer
    public var port: Int { listener.port }

    /// `configuration` sets admins, CORS, limits...; the listener always takes an ephemeral
    /// loopback port, and `configure` may still adjust it.
    public init(directory existing: String? = nil, configuration: ServerConfiguration = .testing(),
                configure: (inout ListenerConfiguration) -> Void = { _ in }) throws {
        TestLogging.bootstrapped
        directory = existing ?? TestServer.makeTemporaryDirectory()
        databases = try DatabaseManager(directory: directory)
        var configuration = configuration
        configuration.listener.port = 0
        configure(&configuration.listener)
        server = try CouchServer(databases: databases, configuration: configuration)
        listener = Listener(configuration: configuration.listener, handler: server)
        try listener.start()
    }

    public static func makeTemporaryDirectory() -> String {
        TestLogging.bootstrapped
        let path = NSTemporaryDirectory() + "couchette-test-" + Digest.randomHex(bytes: 8)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Stops listening; keeps the data directory when `keepData` (to restart on it).
    public func stop(keepData: Bool = false) {
        server.shutdown()
        listener.stop()
        databases.updates.flush()
        databases.ownership.release()
        if !keepData { try? FileManager.default.removeItem(atPath: directory) }
    }

    deinit { listener.stop() }

    // MARK: Requests

    @discardableResult
    public func request(_ method: String, _ path: String, headers: [(String, String)] = [],
                        body: String? = nil) throws -> HTTPTestResponse {
        var allHeaders = headers
        if body != nil, !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            allHeaders.append(("Content-Type", "application/json"))
        }
        return try httpRequest(port: port, method, path, headers: allHeaders, body: body.map { Array($0.utf8) })
    }

    /// A request whose response must be JSON; returns status and parsed body.
    @discardableResult
    public func json(_ method: String, _ path: String, headers: [(String, String)] = [],
                     body: String? = nil) throws -> (status: Int, json: JSONValue) {
        let response = try request(method, path, headers: headers, body: body)
        return (response.status, try JSONValue.parse(response.body))
    }

    /// Creates a database and fails loudly if that did not work.
    public func createDatabase(_ name: String) throws {
        let response = try request("PUT", "/" + name)
        guard response.status == 201 else { throw TestServerError.unexpected("PUT /\(name): \(response.status) \(response.text)") }
    }

    /// PUTs a document and returns its new revision.
    @discardableResult
    public func put(_ database: String, _ id: String, _ body: String) throws -> String {
        let (status, json) = try self.json("PUT", "/\(database)/\(id)", body: body)
        guard status == 201, let rev = json["rev"]?.stringValue else {
            throw TestServerError.unexpected("PUT /\(database)/\(id): \(status) \(json.serializedString())")
        }
        return rev
    }
}

extension ServerConfiguration {
    /// A configuration for tests: these admins (name: password), and few PBKDF2
    /// iterations so that hashing passwords costs microseconds.
    public static func testing(admins: [String: String] = [:]) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.authentication.iterations = 10
        configuration.authentication.admins = admins.sorted { $0.key < $1.key }.map { AdminEntry(name: $0.key, secret: $0.value) }
        return configuration
    }
}

/// `Authorization: Basic` for a name and password.
public func basicAuthorization(_ name: String, _ password: String) -> (String, String) {
    ("Authorization", "Basic " + Data("\(name):\(password)".utf8).base64EncodedString())
}

public enum TestServerError: Error, CustomStringConvertible {
    case unexpected(String)
    public var description: String {
        switch self { case .unexpected(let text): text }
    }
}

/// Tests log warnings only: a request log line per request would drown the output.
enum TestLogging {
    static let bootstrapped: Void = {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
    }()
}

/// The number of a sequence as the server writes it (`"12-g2wA..."`): nil unless it is
/// CouchDB 3's string form, so tests also check the form.
public func sequenceNumber(_ value: JSONValue?) -> Int? {
    guard let text = value?.stringValue, text.contains("-") else { return nil }
    return UpdateSequence(parsing: text)?.number
}

/// What the latest run of a replication added to a counter of its result's `history`: the
/// newest entry's less the one before (CouchDB's counters are the replication's since its
/// first run; a first run adds its whole count).
public func addedByLastRun(_ result: JSONValue?, _ counter: String) -> Int? {
    guard let history = result?["history"]?.arrayValue, let latest = history.first?[counter]?.intValue else { return nil }
    return latest - (history.dropFirst().first?[counter]?.intValue ?? 0)
}
