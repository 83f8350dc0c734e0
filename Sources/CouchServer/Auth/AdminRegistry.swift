import CouchCore
import Foundation

/// A server admin given on the command line or in a configuration file: a password in
/// clear (hashed before anything keeps it) or a hash in CouchDB's `local.ini` form.
public struct AdminEntry: Sendable {
    public let name: String
    public let secret: String

    public init(name: String, secret: String) {
        self.name = name
        self.secret = secret
    }

    /// Reads `NAME:PASSWORD` as `--admin` takes it.
    public init?(commandLine text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = String(text[..<colon])
        let secret = String(text[text.index(after: colon)...])
        guard AdminRegistry.isValidName(name), !secret.isEmpty else { return nil }
        self.init(name: name, secret: secret)
    }
}

/// The server admins, kept only as PBKDF2 hashes. They persist in the data directory
/// (`admins.ini`, CouchDB's `[admins]` section, mode 0600), so `--admin` need not be
/// repeated at every start; a password given again replaces the stored hash.
public struct AdminRegistry: Sendable {
    public static let fileName = "admins.ini"
    public let admins: [String: PasswordHash]

    public init(admins: [String: PasswordHash]) {
        self.admins = admins
    }

    public var isEmpty: Bool { admins.isEmpty }
    public var names: [String] { admins.keys.sorted() }

    public func hash(for name: String) -> PasswordHash? { admins[name] }

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && !name.contains(where: { $0 == "=" || $0 == "[" || $0 == "]" || $0 == ";" || $0.isNewline })
            && name.trimmingWhitespace() == name
    }

    /// The admins stored in `directory`, plus `configured` ones (hashed with `hasher`);
    /// writes the file back when that changed it.
    public static func load(directory: String, adding configured: [AdminEntry],
                            hasher: PasswordHasher) throws(ConfigurationError) -> AdminRegistry {
        let path = directory + "/" + fileName
        var admins: [String: PasswordHash] = [:]
        if let text = PrivateFile.read(path) {
            for entry in try ConfigurationFile(text: text).entries(in: "admins") {
                guard let hash = PasswordHash(adminEntry: entry.value) else {
                    throw ConfigurationError("\(path): the entry for admin \(entry.key) is not a password hash")
                }
                admins[entry.key] = hash
            }
        }
        var changed = false
        for entry in configured {
            guard isValidName(entry.name) else { throw ConfigurationError("invalid admin name \"\(entry.name)\"") }
            if PasswordHash.isHashedAdminEntry(entry.secret) {
                guard let hash = PasswordHash(adminEntry: entry.secret) else {
                    throw ConfigurationError("the hash given for admin \(entry.name) is malformed")
                }
                if admins[entry.name] != hash {
                    admins[entry.name] = hash
                    changed = true
                }
            } else if let stored = admins[entry.name], (try? hasher.verify(entry.secret, against: stored)) == true {
                // The same password again: keep its hash, and the sessions signed with its salt.
                continue
            } else {
                admins[entry.name] = hasher.hash(entry.secret)
                changed = true
            }
        }
        let registry = AdminRegistry(admins: admins)
        if changed { try registry.save(to: path) }
        return registry
    }

    /// The registry with `name` given `hash`, or removed when `hash` is nil.
    func setting(_ name: String, to hash: PasswordHash?) -> AdminRegistry {
        var admins = self.admins
        admins[name] = hash
        return AdminRegistry(admins: admins)
    }

    static func path(in directory: String) -> String { directory + "/" + fileName }

    func save(to path: String) throws(ConfigurationError) {
        var text = "; Couchette's server admins, as CouchDB's local.ini keeps them: PBKDF2 hashes, never passwords.\n[admins]\n"
        for name in names { text += "\(name) = \(admins[name]!.adminEntry)\n" }
        try PrivateFile.write(text, to: path)
    }
}
