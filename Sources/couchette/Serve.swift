import ArgumentParser
import CouchServer
import CouchStore
import Dispatch
import Foundation
import Logging

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the databases of a data directory over HTTP.")

    @Option(help: "TCP port to listen on; 0 picks a free port and prints it.")
    var port = 5984

    @Option(help: "IPv4 address to bind; the default only accepts connections from this machine.")
    var bind = "127.0.0.1"

    @Option(name: .customLong("data-dir"), help: "Directory holding one SQLite file per database; created if missing.")
    var dataDirectory = "./data"

    @Option(help: "HTTP worker threads (requests handled at once).")
    var threads = 16

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535") }
        guard threads > 0 else { throw ValidationError("--threads must be positive") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "couchette")
        let databases = try DatabaseManager(directory: dataDirectory)
        let server = CouchServer(databases: databases)
        var configuration = ListenerConfiguration()
        configuration.port = port
        configuration.bindAddress = bind
        configuration.threadCount = threads
        let listener = Listener(configuration: configuration, handler: server.handle)
        try listener.start()
        // Written unbuffered, so a parent process reading the chosen port sees it at once.
        let banner = "Couchette \(ServerInfo.version) listening on http://\(bind):\(listener.port)/ (data in \(dataDirectory))\n"
        FileHandle.standardOutput.write(Data(banner.utf8))
        logger.info("listening on \(bind):\(listener.port)")
        ShutdownSignals.wait { signal in
            logger.info("received \(signal), stopping")
            listener.stop()
        }
    }
}
