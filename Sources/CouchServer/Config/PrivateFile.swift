import Foundation

/// Writes a file readable by its owner only, atomically (temporary file, fsync, rename).
enum PrivateFile {
    static func write(_ text: String, to path: String) throws(ConfigurationError) {
        let temporary = path + ".tmp-" + String(getpid())
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw ConfigurationError("cannot write \(path)") }
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        guard written == bytes.count, synced == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw ConfigurationError("cannot write \(path)")
        }
    }

    /// The file's text, after making sure nobody but its owner can read it.
    static func read(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        chmod(path, 0o600)
        return String(data: data, encoding: .utf8)
    }
}
