import CouchCore
import CouchStore
import Foundation

/// The open indexes of every database, shared by every caller: one `ViewIndex` per
/// database and signature, so design documents with identical views use one index. Indexes
/// used recently are also brought up to date in the background after the database commits.
public final class IndexManager: @unchecked Sendable {
    private let lock = NSLock()
    private var open: [String: ViewIndex] = [:]
    private var watched: [String: Watch] = [:]
    private var signatureProviders: [@Sendable (Database) -> Set<String>] = []
    private let background = DispatchQueue(label: "couchette.views.background", qos: .utility)
    /// How long after a commit background updates start (commits in between join them).
    public var backgroundDelay: Double = 1
    /// Indexes not queried for this long are no longer updated in the background.
    public var backgroundWindow: Double = 3600
    private static let maximumOpen = 256

    /// A database's commit observation and the indexes to update after its commits.
    private struct Watch {
        let token: Int
        weak var database: Database?
        var indexes: [String: (index: ViewIndex, used: Date)] = [:]
        var scheduled = false
    }

    public init() {}

    /// Adds a source of signatures still in use in a database (JavaScript views, Mango
    /// indexes): `_view_cleanup` keeps the files of every signature some provider names.
    public func registerSignatureProvider(_ provider: @escaping @Sendable (Database) -> Set<String>) {
        lock.withLock { signatureProviders.append(provider) }
    }

    /// The index of `definition` in `database`, opened (or created) on first use. It is not
    /// updated here: call `update(from:)` before reading when the query wants fresh rows.
    /// `query`: a query uses it (it is then updated in the background after writes for a
    /// while); `_info` only looks, and leaves an index nobody queries as it is, as CouchDB does.
    public func index(for definition: IndexDefinition, in database: Database, query: Bool = true) throws(CouchError) -> ViewIndex {
        let key = Self.key(database, definition.signature)
        if let index = lock.withLock({ open[key] }) {
            if query { noteUse(index, database: database) }
            return index
        }
        let index = try ViewIndex(definition: definition, database: database)
        let winner: ViewIndex = lock.withLock {
            if let existing = open[key] { return existing }
            if open.count >= Self.maximumOpen { open.removeAll() }
            open[key] = index
            return index
        }
        if query { noteUse(winner, database: database) }
        return winner
    }

    /// An index already open for `signature` (for `_info` on an index never queried: nil).
    public func openIndex(signature: String, in database: Database) -> ViewIndex? {
        lock.withLock { open[Self.key(database, signature)] }
    }

    /// Removes the index files of `database` whose signature no provider names
    /// (`POST /db/_view_cleanup`).
    public func cleanup(_ database: Database) {
        let providers = lock.withLock { signatureProviders }
        let keep = providers.reduce(into: Set<String>()) { $0.formUnion($1(database)) }
        let directory = database.indexDirectory
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for file in files {
            let signature = String(file.prefix { $0 != "." })
            guard !keep.contains(signature) else { continue }
            lock.withLock {
                _ = open.removeValue(forKey: Self.key(database, signature))
                if var watch = watched[Self.watchKey(database)] {
                    watch.indexes[signature] = nil
                    watched[Self.watchKey(database)] = watch
                }
            }
            unlink(directory + "/" + file)
        }
    }

    private static func key(_ database: Database, _ signature: String) -> String {
        watchKey(database) + "|" + signature
    }

    private static func watchKey(_ database: Database) -> String {
        database.path + "|" + database.instanceStartTime
    }

    // MARK: Background updates

    /// Brings `index` up to date soon, in the background (`update=lazy`).
    public func updateSoon(_ index: ViewIndex, database: Database) {
        noteUse(index, database: database)
        schedule(database)
    }

    private func noteUse(_ index: ViewIndex, database: Database) {
        let key = Self.watchKey(database)
        lock.lock()
        defer { lock.unlock() }
        // A database closed by the cache and opened again is a new object: observe that one.
        if watched[key]?.database !== database {
            if let previous = watched[key], let old = previous.database { old.notifier.remove(previous.token) }
            let indexes = watched[key]?.indexes ?? [:]
            let token = database.notifier.observe { [weak self, weak database] event in
                guard let self, let database else { return }
                switch event {
                case .committed: self.schedule(database)
                case .databaseDeleted: self.forget(database)
                }
            }
            watched[key] = Watch(token: token, database: database, indexes: indexes)
        }
        watched[key]?.indexes[index.definition.signature] = (index, Date())
    }

    private func schedule(_ database: Database) {
        let key = Self.watchKey(database)
        let shouldSchedule: Bool = lock.withLock {
            guard var watch = watched[key], !watch.scheduled else { return false }
            watch.scheduled = true
            watched[key] = watch
            return true
        }
        guard shouldSchedule else { return }
        background.asyncAfter(deadline: .now() + backgroundDelay) { [weak self, weak database] in
            guard let self, let database else { return }
            let indexes: [ViewIndex] = self.lock.withLock {
                guard var watch = self.watched[key] else { return [] }
                watch.scheduled = false
                let horizon = Date().addingTimeInterval(-self.backgroundWindow)
                watch.indexes = watch.indexes.filter { $0.value.used > horizon }
                self.watched[key] = watch
                return watch.indexes.values.map(\.index)
            }
            for index in indexes {
                do {
                    try index.update(from: database)
                } catch {
                    ViewIndex.logger.warning("background update of \(database.name) index \(index.definition.signature) failed: \((error as? CouchError)?.reason ?? String(describing: error))")
                }
            }
        }
    }

    private func forget(_ database: Database) {
        let key = Self.watchKey(database)
        lock.withLock {
            if let watch = watched.removeValue(forKey: key) { database.notifier.remove(watch.token) }
            open = open.filter { !$0.key.hasPrefix(key + "|") }
        }
    }
}
