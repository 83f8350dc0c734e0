import ArgumentParser
import CouchStore
import Foundation

/// Opening a data directory from a command that is not the server: the directory must be
/// no other process's (`DataDirectoryLock`). When a server has it, the command says so and
/// how to ask that server instead.
enum DataDirectory {
    /// The directory's databases, or a refusal naming the server that holds it.
    /// `instead` tells what to ask that server (an HTTP request, another option).
    static func open(_ path: String, mustExist: Bool = true, instead: (String) -> String) throws -> DatabaseManager {
        if mustExist && !FileManager.default.fileExists(atPath: path) {
            throw ValidationError("no data directory at \(path)")
        }
        do {
            return try DatabaseManager(directory: path)
        } catch let inUse as DataDirectoryLock.InUse {
            throw ValidationError(refusal(inUse, instead: instead))
        }
    }

    static func refusal(_ inUse: DataDirectoryLock.InUse, instead: (String) -> String) -> String {
        guard let address = inUse.address else { return "\(inUse); stop it first" }
        return "\(inUse); \(instead(address.hasSuffix("/") ? String(address.dropLast()) : address))"
    }
}
