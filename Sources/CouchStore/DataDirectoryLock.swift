import CouchCore
import Foundation

/// One process at a time owns a data directory: every `DatabaseManager` holds an exclusive
/// lock on its `couchette.lock` file for as long as it is open, so no second process (a
/// command-line tool beside a running server) ever writes a database file another one has
/// open — SQLite's own locks keep each write whole, but the store's caches (sequences, the
/// revision trees a writer holds) would go stale and answer wrongly. A server also writes the
/// address it serves in `couchette.uri` (as CouchDB's `couch.uri`), so tools that find the
/// directory taken can work through its HTTP API or name it in their refusal.
public final class DataDirectoryLock: @unchecked Sendable {
    public static let lockFile = "couchette.lock"
    public static let addressFile = "couchette.uri"
    private let directory: String
    private var descriptor: Int32
    private let lock = NSLock()

    /// Takes the directory, or throws `DataDirectoryLock.InUse` naming the owner's address.
    public init(directory: String) throws {
        self.directory = directory
        descriptor = open(directory + "/" + Self.lockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CouchError.internalError("cannot open \(directory)/\(Self.lockFile): \(String(cString: strerror(errno)))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            // Through `release`, which forgets the descriptor: `deinit` runs when a fully
            // initialised object's `init` throws, and a second `close` of the same number may
            // close what another thread has opened since (a client's socket, a database file).
            release()
            throw InUse(directory: directory, address: Self.address(in: directory))
        }
    }

    deinit { release() }

    /// Gives the directory up (a server that stops); idempotent.
    public func release() {
        lock.withLock {
            guard descriptor >= 0 else { return }
            close(descriptor)
            descriptor = -1
        }
    }

    /// Records the address a server serves the directory at (`http://127.0.0.1:5984/`).
    public func publish(address: String) {
        let path = directory + "/" + Self.addressFile
        try? Data((address + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// Forgets the address (the server stopped).
    public func withdraw() {
        unlink(directory + "/" + Self.addressFile)
    }

    /// The address the owner of `directory` published, if any.
    public static func address(in directory: String) -> String? {
        guard let text = try? String(contentsOfFile: directory + "/" + addressFile, encoding: .utf8) else { return nil }
        let address = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return address.isEmpty ? nil : address
    }

    /// The directory is another process's.
    public struct InUse: Error, CustomStringConvertible {
        public let directory: String
        /// The owning server's address, when it published one.
        public let address: String?

        public var description: String {
            if let address { return "the data directory \(directory) is in use by the Couchette server at \(address)" }
            return "the data directory \(directory) is in use by another Couchette process"
        }
    }
}
