import Foundation

extension ConfigurationFile {
    public init(contentsOf path: String) throws(ConfigurationError) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("cannot read configuration file \(path)")
        }
        try self.init(text: text)
    }

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
        // CRLF is one `Character`: split on every line end, as the file is read.
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
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
