import CouchCore
import Foundation

/// The configuration while the server runs, in layers as CouchDB layers its ini files:
/// what the server was started with (defaults, `--config` file, `COUCHETTE_*` variables,
/// command line), under the values set through `/_node/_local/_config`, which are saved
/// in the data directory's `local.ini` and read again at the next start. At start, values
/// from the command line or the environment (`pinnedKeys`) still win over `local.ini`;
/// a value set while running wins over everything until the next start.
final class LiveConfiguration: @unchecked Sendable {
    static let fileName = "local.ini"
    private let lock = NSLock()
    private let base: ServerConfiguration
    private var pinned: Set<String>
    /// `local.ini`'s entries, in file order.
    private var stored: [ConfigurationFile.Entry] = []
    let path: String

    init(base: ServerConfiguration, directory: String) throws(ConfigurationError) {
        self.base = base
        pinned = base.pinnedKeys
        path = directory + "/" + Self.fileName
        stored = try Self.read(path)
    }

    private static func read(_ path: String) throws(ConfigurationError) -> [ConfigurationFile.Entry] {
        guard let text = PrivateFile.read(path) else { return [] }
        return try ConfigurationFile(text: text).entries.filter { $0.section != "admins" }
    }

    /// The entries set through `_config` (and read from `local.ini`), as they were given.
    var storedEntries: [ConfigurationFile.Entry] { lock.withLock { stored } }

    /// The configuration now in force. Admins configured at start are added once, by the
    /// first `AccessControl`; later ones come from the admins file alone.
    func effective(firstTime: Bool = false) throws(ConfigurationError) -> ServerConfiguration {
        lock.lock()
        defer { lock.unlock() }
        return try compute(stored, pinned: pinned, firstTime: firstTime)
    }

    private func compute(_ entries: [ConfigurationFile.Entry], pinned: Set<String>,
                         firstTime: Bool) throws(ConfigurationError) -> ServerConfiguration {
        var configuration = base
        if !firstTime { configuration.authentication.admins = [] }
        try configuration.apply(ConfigurationFile(entries: entries.filter { !pinned.contains($0.section + "/" + $0.key) }))
        try configuration.validate()
        return configuration
    }

    /// Sets (or with a nil value removes) a key; `check` sees the resulting configuration
    /// and may refuse it, leaving everything as it was. Answers the old configuration.
    func change(section: String, key: String, value: String?, persist: Bool,
                check: (ServerConfiguration) throws -> Void) throws {
        lock.lock()
        defer { lock.unlock() }
        var entries = stored
        entries.removeAll { $0.section == section && $0.key == key }
        if let value { entries.append(ConfigurationFile.Entry(section: section, key: key, value: value)) }
        var newPinned = pinned
        newPinned.remove(section + "/" + key)
        let configuration = try compute(entries, pinned: newPinned, firstTime: false)
        try check(configuration)
        if persist { try Self.write(entries, to: path) }
        stored = entries
        pinned = newPinned
    }

    /// `POST _config/_reload`: reads `local.ini` again, dropping values set without persisting.
    func reload() throws(ConfigurationError) {
        lock.lock()
        defer { lock.unlock() }
        stored = try Self.read(path)
    }

    private static func write(_ entries: [ConfigurationFile.Entry], to path: String) throws(ConfigurationError) {
        var text = "; Set through /_node/_local/_config. Command-line options and COUCHETTE_* variables override it at start.\n"
        var sections: [String] = []
        for entry in entries where !sections.contains(entry.section) { sections.append(entry.section) }
        for section in sections {
            text += "\n[\(section)]\n"
            for entry in entries where entry.section == section { text += "\(entry.key) = \(entry.value)\n" }
        }
        try PrivateFile.write(text, to: path)
    }
}
