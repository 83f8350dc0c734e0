import CouchCore
import Foundation
import Logging

/// The configuration while the server runs, in layers as CouchDB layers its ini files:
/// what the server was started with (defaults, `--config` file, `COUCHETTE_*` variables,
/// command line), under the values set through `/_node/_local/_config`, which are saved
/// in the data directory's `local.ini` and read again at the next start. At start, values
/// from the command line or the environment (`pinnedKeys`) still win over `local.ini`;
/// a value set while running wins over everything until the next start.
///
/// `local.ini` never stops a start: a line it cannot read, a value `ConfigurationRules`
/// refuses, a path, or a value that with the ones before it makes a configuration
/// `ServerConfiguration.validate` refuses, is logged and left out (the layers below apply).
final class LiveConfiguration: @unchecked Sendable {
    static let fileName = "local.ini"
    private let lock = NSLock()
    private let base: ServerConfiguration
    private var pinned: Set<String>
    /// `local.ini`'s entries, in file order.
    private var stored: [ConfigurationFile.Entry] = []
    let path: String
    private let logger = Logger(label: "couchette.config")

    init(base: ServerConfiguration, directory: String) {
        self.base = base
        pinned = base.pinnedKeys
        path = directory + "/" + Self.fileName
        stored = usable(read())
    }

    /// `local.ini`'s entries that `ConfigurationRules` accepts (admins live in their own file).
    private func read() -> [ConfigurationFile.Entry] {
        guard let text = PrivateFile.read(path) else { return [] }
        let (file, problems) = ConfigurationFile.lenient(text: text)
        for problem in problems { logger.warning("\(path), \(problem): ignored") }
        return file.entries.filter { entry in
            guard entry.section != "admins" else { return false }
            if ConfigurationRules.isPath(section: entry.section, key: entry.key) {
                logger.warning("\(path): [\(entry.section)] \(entry.key) names a path: taken from --config, the command line or the environment only; ignored")
                return false
            }
            do {
                try ConfigurationRules.check(section: entry.section, key: entry.key, value: entry.value)
                return true
            } catch {
                logger.warning("\(path): \(error); ignored")
                return false
            }
        }
    }

    /// The entries that, each with the ones kept before it, still make a valid configuration.
    private func usable(_ entries: [ConfigurationFile.Entry]) -> [ConfigurationFile.Entry] {
        var kept: [ConfigurationFile.Entry] = []
        for entry in entries {
            do {
                _ = try compute(kept + [entry], pinned: pinned, firstTime: false)
                kept.append(entry)
            } catch {
                logger.warning("\(path): [\(entry.section)] \(entry.key) = \(entry.value): \(error); ignored")
            }
        }
        return kept
    }

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
    func reload() {
        lock.withLock { stored = usable(read()) }
    }

    private static func write(_ entries: [ConfigurationFile.Entry], to path: String) throws(ConfigurationError) {
        let text = "; Set through /_node/_local/_config. Command-line options and COUCHETTE_* variables override it at start.\n"
        try PrivateFile.write(text + ConfigurationFile(entries: entries).text, to: path)
    }
}
