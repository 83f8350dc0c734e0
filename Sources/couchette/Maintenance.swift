import ArgumentParser
import CouchCore
import CouchServer
import CouchStore
import Foundation

/// `couchette version`: Couchette's version, the CouchDB API it follows, SQLite's.
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the versions of Couchette, its CouchDB API and SQLite.",
        discussion: "See docs/configuration.md.")

    func run() throws {
        print("Couchette \(ServerInfo.version) (CouchDB \(ServerInfo.couchDBVersion) API, SQLite \(DatabaseManager.sqliteVersion))")
    }
}

/// `couchette compact`: compacts databases of a data directory while no server runs on it.
struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compact databases of a data directory (drop the bodies no revision needs, reclaim space).",
        discussion: """
            It refuses a data directory a server has open; a running server compacts with POST /db/_compact. \
            See docs/operations.md.
            """)

    @Option(name: .customLong("data-dir"), help: "The data directory (default ./data).")
    var dataDirectory = "./data"

    @Argument(help: "Databases to compact (default: every database).")
    var names: [String] = []

    func run() throws {
        let databases = try DataDirectory.open(dataDirectory) { server in
            "compact through it: curl -X POST -H 'Content-Type: application/json' \(server)/DB/_compact"
        }
        var selected = try databases.allNames()
        if !names.isEmpty {
            selected = try names.map { name in
                do { return try DatabaseName(name) } catch { throw ValidationError("\(name) is not a database name") }
            }
        }
        for name in selected {
            let database = try databases.database(name)
            let before = try database.info().fileSize
            _ = try database.compact()
            let after = try database.info().fileSize
            print("\(name): \(before) → \(after) bytes")
        }
    }
}
