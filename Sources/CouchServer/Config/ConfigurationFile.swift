import Foundation

/// An ini file as CouchDB's `local.ini`: `[section]` headers, `key = value` lines,
/// `;` comments. Keeps sections and keys in file order.
public struct ConfigurationFile: Sendable {
    public struct Entry: Sendable {
        public let section: String
        public let key: String
        public let value: String

        public init(section: String, key: String, value: String) {
            self.section = section
            self.key = key
            self.value = value
        }
    }

    public private(set) var entries: [Entry] = []

    public init(text: String) throws(ConfigurationError) {
        var section = ""
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix(";") || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw ConfigurationError("line \(number + 1): unterminated section header") }
                section = String(line.dropFirst().dropLast()).trimmingWhitespace()
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError("line \(number + 1): expected key = value")
            }
            let key = line[..<equals].trimmingWhitespace()
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            guard !key.isEmpty else { throw ConfigurationError("line \(number + 1): empty key") }
            entries.append(Entry(section: section, key: key, value: value))
        }
    }

    public init(entries: [Entry]) {
        self.entries = entries
    }

    public init(contentsOf path: String) throws(ConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("cannot read configuration file \(path)")
        }
        try self.init(text: text)
    }

    /// The last value of `key` in any of `sections` (CouchDB reads `[chttpd_auth]` and its
    /// older name `[couch_httpd_auth]` alike).
    public func value(_ key: String, in sections: String...) -> String? {
        entries.last { sections.contains($0.section) && $0.key == key }?.value
    }

    public func entries(in section: String) -> [Entry] {
        entries.filter { $0.section == section }
    }
}

public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

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

extension ConfigurationFile {
    /// Replaces every password in clear in the file's `[admins]` section by its PBKDF2
    /// hash, in place, as CouchDB does with `local.ini`. Returns whether it changed the file.
    public static func hashAdminPasswords(in path: String, iterations: Int) throws(ConfigurationError) -> Bool {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("cannot read configuration file \(path)")
        }
        let hasher = PasswordHasher(iterations: iterations)
        var section = ""
        var changed = false
        var lines: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingWhitespace()
            if trimmed.hasPrefix("[") && trimmed.hasSuffix("]") {
                section = String(trimmed.dropFirst().dropLast()).trimmingWhitespace()
            } else if section == "admins", !trimmed.hasPrefix(";"), !trimmed.hasPrefix("#"),
                      let equals = line.firstIndex(of: "=") {
                let value = line[line.index(after: equals)...].trimmingWhitespace()
                if !value.isEmpty, !PasswordHash.isHashedAdminEntry(value) {
                    lines.append(line[..<equals].trimmingWhitespace() + " = " + hasher.hash(value).adminEntry)
                    changed = true
                    continue
                }
            }
            lines.append(String(line))
        }
        guard changed else { return false }
        var status = stat()
        let mode = stat(path, &status) == 0 ? status.st_mode & 0o777 : 0o600
        try PrivateFile.write(lines.joined(separator: "\n"), to: path)
        chmod(path, mode)
        return true
    }
}
