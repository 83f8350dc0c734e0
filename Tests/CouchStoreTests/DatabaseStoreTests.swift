import CouchCore
import CouchStore
import CouchTestSupport
import Foundation
import Testing

@Suite struct DatabaseStoreTests {
    let directory = TestServer.makeTemporaryDirectory()

    func edit(_ id: String, _ json: String, revision: String? = nil) throws -> DocumentEdit {
        var edit = try DocumentEdit(json: try JSONValue.parse(json))
        edit.id = DocumentID(id)
        if let revision { edit.revision = RevisionID(revision) }
        return edit
    }

    @Test func acknowledgedWritesSurviveReopening() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var revisions: [RevisionID] = []
        do {
            let manager = try DatabaseManager(directory: directory)
            let database = try manager.create(try DatabaseName("durable"))
            for index in 0..<50 { revisions.append(try database.update(try edit("doc\(index)", #"{"i":\#(index)}"#))) }
        }
        let reopened = try DatabaseManager(directory: directory)
        let database = try reopened.database(try DatabaseName("durable"))
        #expect(database.updateSequence == 50)
        for index in 0..<50 {
            let snapshot = try database.document(DocumentID("doc\(index)"))
            #expect(snapshot.revision.revision == revisions[index])
            #expect(String(decoding: snapshot.revision.body, as: UTF8.self) == #"{"i":\#(index)}"#)
        }
    }

    /// The changes after a sequence, counted from a remembered count or afresh, whatever
    /// sequence the caller names (below 0, past the last, `Int.min` and `Int.max` included).
    @Test func pendingChangesCountFromAnySequence() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("pending"))
        for index in 0..<30 { _ = try database.update(try edit("doc\(index)", #"{"i":\#(index)}"#)) }
        for sequence in [10, 12, 9, Int.min, -1, 0, 29, 30, Int.max, 11] {
            #expect(try database.pendingChanges(after: sequence) == 30 - min(max(sequence, 0), 30), "after \(sequence)")
        }
    }

    /// A batch of reads shares read transactions, but not for the whole batch: a write made
    /// while it runs is seen within a few hundred documents (the log can be checkpointed past it).
    @Test func aBatchOfReadsDoesNotHoldOneSnapshotForAll() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("batches"))
        _ = try database.bulkUpdate((0..<600).map { try edit("doc\($0)", #"{"i":\#($0)}"#) }, newEdits: true)
        let first = try database.document(DocumentID("doc0")).revision.revision
        let seen = try database.readingInBatches { reader -> (before: RevisionID, after: RevisionID, count: Int) in
            let before = try reader.document(DocumentID("doc0")).revision.revision
            _ = try database.update(try edit("doc0", #"{"i":"changed"}"#, revision: first.description))
            var count = 1
            for index in 1..<600 {
                #expect(try reader.document(DocumentID("doc\(index)")).revision.body.isEmpty == false)
                count += 1
            }
            return (before, try reader.document(DocumentID("doc0")).revision.revision, count)
        }
        #expect(seen.count == 600)
        #expect(seen.before == first)
        #expect(seen.after.generation == 2, "a batch of 600 reads still saw the snapshot of its first")
    }

    @Test func concurrentWritersShareCommitsAndEachGetsItsOwnResult() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("busy"))
        let results = ResultCollector()
        DispatchQueue.concurrentPerform(iterations: 200) { index in
            // Every fourth writer collides on a shared ID: exactly one of those may win.
            let id = index % 4 == 0 ? "shared" : "doc\(index)"
            do {
                _ = try database.update(try edit(id, #"{"i":\#(index)}"#))
                results.add(id: id, ok: true)
            } catch {
                results.add(id: id, ok: false)
            }
        }
        #expect(results.successes("shared") == 1)
        #expect(results.failures("shared") == 49)
        #expect(results.totalSuccesses == 151)
        #expect(database.updateSequence == 151)
        #expect(try database.info().documentCount == 151)
    }

    /// More writers than cores, each waiting for the leader to wake it (its write done, or
    /// the writer handed to it), while compactions take the writer between batches.
    @Test(.timeLimit(.minutes(2)))
    func manyWritersAndCompactionsEachGetTheWriterInTurn() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("turns"))
        let results = ResultCollector()
        let writers = 24, writesEach = 30
        let group = DispatchGroup()
        for writer in 0..<writers {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for index in 0..<writesEach {
                    let id = "w\(writer)-\(index)"
                    results.add(id: id, ok: (try? database.update(try self.edit(id, #"{"i":\#(index)}"#))) != nil)
                }
            }
        }
        group.enter()
        Thread.detachNewThread {
            defer { group.leave() }
            for _ in 0..<5 { _ = try? database.compact() }
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        #expect(results.totalSuccesses == writers * writesEach)
        #expect(database.updateSequence == writers * writesEach)
        #expect(try database.info().documentCount == writers * writesEach)
    }

    @Test func aFailedWriteInABatchLeavesNothingBehind() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("batch"))
        _ = try database.update(try edit("taken", "{}"))
        let results = try database.bulkUpdate([
            try edit("fresh", #"{"a":1}"#),
            try edit("taken", #"{"b":2}"#),
            try edit("other", #"{"c":3}"#),
        ], newEdits: true)
        #expect((try? results[0].get()) != nil)
        #expect((try? results[1].get()) == nil)
        #expect((try? results[2].get()) != nil)
        #expect(database.updateSequence == 3)
        let changes = try database.changes(ChangesQuery())
        #expect(changes.map(\.id.rawValue) == ["taken", "fresh", "other"])
        #expect(changes.map(\.sequence) == [1, 2, 3])
    }

    /// A large batch is prepared on several threads: its results, revisions and sequences must
    /// still follow the batch's order, as one document written at a time would give them.
    @Test func aLargeBatchKeepsItsOrderAndTheRevisionsOfSingleWrites() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let batch = try manager.create(try DatabaseName("batch"))
        let single = try manager.create(try DatabaseName("single"))
        for database in [batch, single] { _ = try database.update(try edit("doc0100", "{}")) }
        let edits = try (0..<500).map { index in
            index % 7 == 3
                ? try edit(String(format: "doc%04d", index), #"{"n":\#(index),"_attachments":{"a.txt":{"content_type":"application/octet-stream","data":"aGk="}}}"#)
                : try edit(String(format: "doc%04d", index), #"{"n":\#(index),"s":"\#(String(repeating: "x", count: index))"}"#)
        }
        let results = try batch.bulkUpdate(edits, newEdits: true)
        #expect(results.count == 500)
        for (index, edit) in edits.enumerated() {
            if index == 100 {
                #expect((try? results[index].get()) == nil)  // a conflict: the document exists
                continue
            }
            #expect(try results[index].get() == (try single.update(edit)), "\(index)")
        }
        let changes = try batch.changes(ChangesQuery())
        #expect(changes.map(\.id.rawValue) == ["doc0100"] + edits.map(\.id!.rawValue).filter { $0 != "doc0100" })
        let attached = try #require(try batch.document(DocumentID("doc0003")).revision.attachments.first)
        #expect(try batch.attachments.read(attached.blobKey) == Array("hi".utf8))
    }

    @Test func deletingADatabaseRemovesItsFiles() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let name = try DatabaseName("temp/sub")
        _ = try manager.create(name)
        #expect(try manager.allNames() == [name])
        try manager.delete(name)
        #expect(try manager.allNames().isEmpty)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains("temp") }
        #expect(leftovers.isEmpty)
        #expect(throws: CouchError.databaseMissing) { try manager.database(name) }
    }
}

final class ResultCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var outcomes: [(String, Bool)] = []
    func add(id: String, ok: Bool) { lock.withLock { outcomes.append((id, ok)) } }
    func successes(_ id: String) -> Int { lock.withLock { outcomes.filter { $0.0 == id && $0.1 }.count } }
    func failures(_ id: String) -> Int { lock.withLock { outcomes.filter { $0.0 == id && !$0.1 }.count } }
    var totalSuccesses: Int { lock.withLock { outcomes.filter(\.1).count } }
}
