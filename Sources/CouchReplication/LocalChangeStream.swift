import CouchCore
import CouchFunctions
import CouchStore
import Foundation

/// A local database's change feed for the replicator: rows read in batches straight from
/// the store's changes index, filtered here (`doc_ids`, `selector`, `_design`, named
/// filters run by the function runtime as `_changes?filter=` would); a
/// continuous feed waits for the database's commit notifications.
final class LocalChangeStream: ChangeStream, @unchecked Sendable {
    private let database: Database
    private let request: ChangesRequest
    private let filter: LocalFilter?
    private static let batchSize = 500

    private let lock = NSLock()
    private var position: Int
    private var lastEmitted: Int
    private var buffer: [ChangeEvent] = []
    private var reportedCaughtUp = false
    private var finished = false
    private var signalled = false
    private var cancelled = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var observer: Int?

    init(database: Database, request: ChangesRequest, functions: FunctionRuntime?) throws(ReplicationError) {
        self.database = database
        self.request = request
        filter = try request.filter.map { filter throws(ReplicationError) in
            try LocalFilter(filter, database: database, functions: functions)
        }
        position = request.since.leadingInteger ?? 0
        lastEmitted = position
        if request.continuous {
            observer = database.notifier.observe { [weak self] _ in self?.signal() }
        }
    }

    deinit {
        if let observer { database.notifier.remove(observer) }
    }

    private func signal() {
        lock.lock()
        signalled = true
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume()
    }

    func cancel() {
        lock.lock()
        cancelled = true
        finished = true
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume()
        if let observer { database.notifier.remove(observer) }
    }

    private enum Step {
        case event(ChangeEvent)
        case end
        case read(since: Int)
    }

    private func nextStep() -> Step {
        lock.withLock {
            if !buffer.isEmpty { return .event(buffer.removeFirst()) }
            if finished || cancelled { return .end }
            signalled = false
            return .read(since: position)
        }
    }

    /// After an empty read: what a caught-up feed says, or nil to wait for a commit.
    private func caughtUp(at since: Int) -> Step? {
        lock.withLock {
            if !request.continuous {
                finished = true
                return .event(.lastSequence(SourceSequence(UpdateSequence(since).json)))
            }
            if !reportedCaughtUp {
                reportedCaughtUp = true
                if lastEmitted != position {
                    // Filtered rows moved the feed on: let the checkpoint follow.
                    lastEmitted = position
                    buffer.append(.caughtUp)
                    return .event(.lastSequence(SourceSequence(UpdateSequence(position).json)))
                }
                return .event(.caughtUp)
            }
            if signalled || cancelled { return .read(since: position) }
            return nil
        }
    }

    private func register(_ continuation: CheckedContinuation<Void, Never>) {
        lock.lock()
        if signalled || cancelled {
            lock.unlock()
            continuation.resume()
        } else {
            waiter = continuation
            lock.unlock()
        }
    }

    func next() async throws(ReplicationError) -> ChangeEvent? {
        while true {
            let since: Int
            switch nextStep() {
            case .event(let event): return event
            case .end: return nil
            case .read(let position): since = position
            }
            let rows: [ChangeRow]
            do {
                let query = ChangesQuery(since: since, limit: Self.batchSize, includeTree: request.allLeaves,
                                         includeBodies: filter?.needsDocument ?? false)
                let database = self.database
                rows = try await Blocking.run { try database.changes(query) }
            } catch {
                throw ReplicationError(.unknown, "cannot read the changes of \(database.name): \(error)")
            }
            if !rows.isEmpty {
                let passes = try filter?.accepts(rows) ?? rows.map { _ in true }
                let events = zip(rows, passes).compactMap { row, passes -> ChangeEvent? in
                    guard passes else { return nil }
                    let revisions = request.allLeaves ? (row.tree?.leaves.map(\.revision) ?? [row.winner]) : [row.winner]
                    return .change(Change(sequence: SourceSequence(UpdateSequence(row.sequence).json), id: row.id,
                                          revisions: revisions, isDeleted: row.isDeleted))
                }
                lock.withLock {
                    position = rows[rows.count - 1].sequence
                    if !events.isEmpty { lastEmitted = position }
                    buffer.append(contentsOf: events)
                    reportedCaughtUp = false
                }
                continue
            }
            switch caughtUp(at: since) {
            case .event(let event)?: return event
            case .end?: return nil
            case .read?: continue
            case nil:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in register(continuation) }
                } onCancel: {
                    self.cancel()
                }
            }
        }
    }
}

/// The filters a local source applies itself.
struct LocalFilter: Sendable {
    enum Kind: Sendable {
        case documentIDs(Set<String>)
        case selector(MangoSelector)
        case designDocuments
        case named(DocumentFilter)
    }

    let kind: Kind

    init(_ filter: ReplicationFilter, database: Database, functions: FunctionRuntime?) throws(ReplicationError) {
        switch filter {
        case .documentIDs(let ids):
            kind = .documentIDs(Set(ids))
        case .selector(let selector):
            do {
                kind = .selector(try MangoSelector(selector))
            } catch {
                throw .badRequest("Invalid selector: \(error.reason)")
            }
        case .named("_design", _):
            kind = .designDocuments
        case .named("_doc_ids", let parameters):
            let ids = parameters["doc_ids"].flatMap { value -> [String]? in
                if let list = value.arrayValue { return list.compactMap(\.stringValue) }
                return value.stringValue.flatMap { try? JSONValue.parse($0).arrayValue?.compactMap(\.stringValue) }
            }
            kind = .documentIDs(Set(ids ?? []))
        case .named(let name, let parameters):
            guard let functions else {
                throw ReplicationError(.notImplemented, "filter `\(name)` cannot run here: no function runtime")
            }
            // The request a replicator's filter sees: `query_params` as the query string.
            var request = FilterRequest(path: [database.name.rawValue, "_changes"], user: .internalWriter)
            request.query = parameters
            do {
                kind = .named(try functions.filter(name, in: database,
                                                   request: request.json(database: database,
                                                                         securityObject: functions.securityObject(of: database))))
            } catch {
                throw ReplicationError(.filterFetchError, "Couldn't run filter `\(name)` of source \(database.name): \(error.reason)")
            }
        }
    }

    var needsDocument: Bool {
        switch kind {
        case .selector, .named: true
        default: false
        }
    }

    func accepts(_ rows: [ChangeRow]) throws(ReplicationError) -> [Bool] {
        guard case .named(let filter) = kind else { return rows.map(accepts) }
        do {
            return try filter.accepts(rows.map {
                DocumentFilter.document(id: $0.id, revision: $0.winner, isDeleted: $0.isDeleted, body: $0.body)
            })
        } catch {
            throw ReplicationError(.unknown, "filter function failed: \(error)")
        }
    }

    func accepts(_ row: ChangeRow) -> Bool {
        switch kind {
        case .documentIDs(let ids): return ids.contains(row.id.rawValue)
        case .designDocuments: return row.id.isDesign
        case .named: return true
        case .selector(let selector):
            var document: JSONObject = ["_id": JSONValue(row.id.rawValue), "_rev": JSONValue(row.winner.description)]
            if let body = row.body, case .object(let members)? = try? JSONValue.parse(body) {
                for (key, value) in members { document[key] = value }
            }
            if row.isDeleted { document["_deleted"] = true }
            return selector.matches(.object(document))
        }
    }
}
