import CouchCore
import CouchStore
import Foundation

/// Changes read and mapped, ready to be written: the changes in order, and per document the
/// rows each view emits (none for documents deleted or left out).
struct MappedBatch {
    let changes: [ChangeRow]
    let rows: [String: [[Emission]]]
    var last: Int { changes.last?.sequence ?? 0 }
}

extension ViewIndex {
    /// Brings the index up to the database's current sequence: purged documents' rows
    /// removed, then changed documents mapped in batches, each batch written in one
    /// transaction while the next is read and mapped on the other cores. Concurrent callers
    /// wait for one update rather than run two. A caller whose client hangs up stops between
    /// batches (what it wrote stays; the next caller goes on).
    public func update(from database: Database) throws(CouchError) {
        let target = database.updateSequence
        if updateSequence >= target, ((try? database.purgeSequence) ?? 0) <= purgeSequence { return }
        updateLock.lock()
        stateLock.withLock { updating = true }
        defer {
            stateLock.withLock { updating = false }
            updateLock.unlock()
        }
        try applyPurges(database)
        let since = updateSequence
        // Catching up on many changes costs less as one build of the stored reductions from
        // the rows than as node updates (a changed row costs a leaf's worth of reads).
        if reductionSeed != nil, target - since > max(Self.batchSize, try reducedRows() / 32) {
            try transaction { try invalidateReductions() }
        }
        // A first build finds no rows to delete: the index is empty, and a document met at a
        // sequence the database had reached when the update began was not met before in it.
        let newUpTo = since == 0 ? target : 0
        var batch = since < target ? try mapBatch(from: database, since: since) : nil
        while let current = batch {
            try RequestCancellation.checkCurrent()
            let next = current.last < target
                ? BackgroundResult { () throws(CouchError) in try self.mapBatch(from: database, since: current.last) }
                : nil
            let rowCountChanges: [Int: Int]
            do {
                rowCountChanges = try write(current, newUpTo: newUpTo)
            } catch {
                _ = try? next?.value()   // nothing of this update runs once it has returned
                throw error
            }
            stateLock.withLock {
                let previous = RowsState(sequence: indexedSequence, purges: indexedPurge)
                indexedSequence = current.last
                carryTotals(from: previous, to: RowsState(sequence: indexedSequence, purges: indexedPurge), by: rowCountChanges)
            }
            batch = try next?.value() ?? nil
        }
        if reductionSeed == nil, !reducingViews.isEmpty, !reductionBuildFailed {
            // The rows are indexed whatever happens here: a reduce query builds the reductions
            // again, or says why not (updates do not try again after a failure: each try reads
            // every row).
            do {
                try rebuildReductions()
            } catch {
                reductionBuildFailed = true
                Self.logger.warning("stored reductions of \(path) not built: \(error.reason)")
            }
        }
    }

    /// The next batch of changes after `since`, mapped; nil when there are none.
    private func mapBatch(from database: Database, since: Int) throws(CouchError) -> MappedBatch? {
        var changes: [ChangeRow] = []
        var inputs: [MapInput] = []
        do {
            // Each document's input is spliced from its body as SQLite holds it (one copy).
            let query = ChangesQuery(since: since, limit: Self.batchSize, includeTree: true, includeBodies: true)
            try database.forEachChange(query) { listed in
                let change = try listed.change(), body = listed.body
                changes.append(change)
                // Design documents are not in views (CouchDB's `include_design` option puts them in).
                if !change.isDeleted, definition.includeDesign || !change.id.isDesign {
                    inputs.append(Self.mapInput(change, body: body, localSequence: definition.includeLocalSequence))
                }
            }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("cannot read changes")
        }
        guard !changes.isEmpty else { return nil }
        let emitted = try mapInParallel(inputs)
        var rows: [String: [[Emission]]] = [:]
        rows.reserveCapacity(inputs.count)
        for (input, emissions) in zip(inputs, emitted) { rows[input.id.rawValue] = emissions }
        return MappedBatch(changes: changes, rows: rows)
    }

    /// Writes a batch's rows in one transaction with the sequence it brings the index to, and
    /// its stored reductions; returns the rows added less the rows removed, by view. Documents
    /// changed at sequences up to `newUpTo` have no rows yet.
    private func write(_ batch: MappedBatch, newUpTo: Int) throws(CouchError) -> [Int: Int] {
        var rowCountChanges: [Int: Int] = [:]
        try transaction {
            var changed = RowChanges(trees: reductionSeed.map(trees) ?? [])
            for change in batch.changes {
                let id = change.id.rawValue
                if change.sequence > newUpTo { try deleteRows(of: id, into: &changed) }
                guard let views = batch.rows[id] else { continue }
                for (view, rows) in views.enumerated() {
                    for (dup, row) in rows.enumerated() {
                        let key = storedKey(row.key, id: change.id, view: view)
                        try writer.run(
                            "INSERT INTO rows (view, key, doc_id, dup, key_json, value) VALUES (?, ?, ?, ?, ?, ?)",
                            [.int(view), .blob(key), .text(id), .int(dup), .blob(row.key.serialized()),
                             .blob(row.value.serialized())])
                        changed.add(view: view, key: key, docID: id, dup: dup)
                    }
                }
            }
            try updateReductions(changed)
            try setMeta("update_seq", String(batch.last))
            rowCountChanges = changed.rowCountChanges
        }
        return rowCountChanges
    }

    /// Removes the rows of documents purged since the index last looked; documents that
    /// keep revisions moved to a new sequence and are mapped again by the update. When the
    /// database no longer lists every purge the index missed, the index starts over.
    private func applyPurges(_ database: Database) throws(CouchError) {
        let databasePurge: Int
        let infos: [(sequence: Int, id: String, revisions: [String])]
        do {
            databasePurge = try database.purgeSequence
            guard databasePurge > purgeSequence else { return }
            infos = try database.purgedInfos().filter { $0.sequence > purgeSequence }
        } catch {
            throw error as? CouchError ?? CouchError.internalError("cannot read purges")
        }
        let complete = infos.first.map { $0.sequence == purgeSequence + 1 } ?? false
        var rowCountChanges: [Int: Int] = [:]
        try transaction {
            if complete {
                var changed = RowChanges(trees: reductionSeed.map(trees) ?? [])
                for info in infos { try deleteRows(of: info.id, into: &changed) }
                try updateReductions(changed)
                rowCountChanges = changed.rowCountChanges
            } else {
                try writer.run("DELETE FROM rows")
                try invalidateReductions()
                try setMeta("update_seq", "0")
            }
            try setMeta("purge_seq", String(databasePurge))
        }
        stateLock.withLock {
            let previous = RowsState(sequence: indexedSequence, purges: indexedPurge)
            if !complete { indexedSequence = 0 }
            indexedPurge = databasePurge
            if complete {
                carryTotals(from: previous, to: RowsState(sequence: indexedSequence, purges: indexedPurge), by: rowCountChanges)
            } else {
                totals.removeAll()
            }
        }
    }

    /// Maps a batch over the available cores: the mapper is called on slices at once.
    private func mapInParallel(_ inputs: [MapInput]) throws(CouchError) -> [[[Emission]]] {
        guard !inputs.isEmpty else { return [] }
        let mapper = definition.mapper
        let slices = inputs.transformInParallelSlices(minimumSlice: 100) { slice -> Result<[[[Emission]]], CouchError> in
            do {
                return .success(try mapper.map(Array(slice)))
            } catch {
                return .failure(error as? CouchError ?? CouchError.internalError("map failed: \(error)"))
            }
        }
        var all: [[[Emission]]] = []
        all.reserveCapacity(inputs.count)
        for slice in slices { all += try slice.get() }
        guard all.count == inputs.count else { throw CouchError.internalError("mapper answered \(all.count) of \(inputs.count) documents") }
        return all
    }

    /// A changed document as map functions see it: `_id`, `_rev`, its members (`body`, as
    /// stored), `_attachments` stubs, `_conflicts` (and `_local_seq` when asked).
    static func mapInput(_ change: ChangeRow, body: UnsafeRawBufferPointer, localSequence: Bool = false) -> MapInput {
        var bytes: [UInt8] = Array("{\"_id\":".utf8)
        bytes.reserveCapacity(body.count + 96)
        JSONWriter.appendString(change.id.rawValue, to: &bytes)
        bytes += Array(",\"_rev\":".utf8)
        // Escaped: a replicated revision's digest may hold any character but whitespace.
        change.winner.appendJSON(to: &bytes)
        if body.count > 2, let start = body.baseAddress, body.first == UInt8(ascii: "{") {
            bytes.append(UInt8(ascii: ","))
            // The members between the braces, copied at once (`dropFirst().dropLast()` on an
            // array here resolved to Sequence's element-by-element copy: a quarter of a build).
            bytes.append(contentsOf: UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self) + 1, count: body.count - 2))
        }
        if !change.attachments.isEmpty {
            bytes += Array(",\"_attachments\":{".utf8)
            for (index, attachment) in change.attachments.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONWriter.appendString(attachment.name, to: &bytes)
                bytes += Array(":{\"content_type\":".utf8)
                JSONWriter.appendString(attachment.contentType, to: &bytes)
                bytes += Array(",\"revpos\":\(attachment.revpos),\"digest\":".utf8)
                JSONWriter.appendString(attachment.digest, to: &bytes)
                bytes += Array(",\"length\":\(attachment.length),\"stub\":true}".utf8)
            }
            bytes.append(UInt8(ascii: "}"))
        }
        if let conflicts = change.tree?.conflicts.filter({ $0 != change.winner }), !conflicts.isEmpty {
            bytes += Array(",\"_conflicts\":[".utf8)
            for (index, conflict) in conflicts.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                conflict.appendJSON(to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        }
        if localSequence { bytes += Array(",\"_local_seq\":\(change.sequence)".utf8) }
        bytes.append(UInt8(ascii: "}"))
        return MapInput(id: change.id, json: bytes)
    }
}

/// Work started on another thread at once, its result taken later (`value` waits for it).
final class BackgroundResult<Value>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<Value, CouchError>?

    init(_ work: @escaping @Sendable () throws(CouchError) -> Value) {
        DispatchQueue.global().async {
            self.result = Result { () throws(CouchError) in try work() }
            self.done.signal()
        }
    }

    func value() throws(CouchError) -> Value {
        done.wait()
        done.signal()   // a second call answers the same
        return try result!.get()
    }
}
