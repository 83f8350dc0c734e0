import CouchCore
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// Reader connections keep their read transaction between reads until a write commits: what a
/// user checks is that no read misses an acknowledged write, and that the kept snapshots neither
/// let the write-ahead log grow nor keep a compaction from truncating it.
@Suite struct ReadSnapshotTests {
    let directory = TestServer.makeTemporaryDirectory()

    func edit(_ id: String, _ json: String, revision: RevisionID? = nil) throws -> DocumentEdit {
        var edit = try DocumentEdit(json: try JSONValue.parse(json))
        edit.id = DocumentID(id)
        edit.revision = revision
        return edit
    }

    func logSize(_ database: Database) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: database.path + "-wal"))?[.size] as? Int) ?? 0
    }

    /// Reads from several threads at once (so that several connections sit idle in the pool,
    /// each with its snapshot).
    func readConcurrently(_ database: Database, _ id: String) {
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20 { _ = try? database.document(DocumentID(id)) }
        }
    }

    @Test func everyReadSeesTheWritesAcknowledgedBeforeIt() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("fresh"))
        let first = try database.update(try edit("counter", #"{"n":0}"#))
        readConcurrently(database, "counter")
        let acknowledged = Counter()
        let stale = Counter()
        let edits = try (1...200).map { try edit("counter", #"{"n":\#($0)}"#) }
        let writer = Thread {
            var revision = first
            for (index, edit) in edits.enumerated() {
                var edit = edit
                edit.revision = revision
                guard let written = try? database.update(edit) else { return acknowledged.set(-1) }
                revision = written
                acknowledged.set(index + 1)
            }
        }
        writer.start()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            while (0..<200).contains(acknowledged.value) {
                let before = acknowledged.value
                let body = try? JSONValue.parse(database.document(DocumentID("counter")).revision.body)
                if (body?["n"]?.intValue ?? -1) < before { stale.add() }
            }
        }
        #expect(acknowledged.value == 200)
        #expect(stale.value == 0, "reads that missed a write acknowledged before they began")
        #expect(try database.document(DocumentID("counter")).revision.revision.generation == 201)
    }

    @Test func keptSnapshotsDoNotLetTheLogGrow() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("growing"))
        _ = try database.update(try edit("seed", "{}"))
        readConcurrently(database, "seed")
        // ~24 MB written one commit at a time; the log is checkpointed every 1,000 pages (4 MB).
        let filler = String(repeating: "x", count: 8_000)
        for index in 0..<1_500 {
            _ = try database.update(try edit("doc\(index)", #"{"text":"\#(filler)"}"#))
        }
        #expect(logSize(database) < 12_000_000, "the log grew to \(logSize(database)) bytes")
    }

    @Test func compactionTruncatesTheLogWhileReadersIdle() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("compacted"))
        for index in 0..<50 { _ = try database.update(try edit("doc\(index)", #"{"i":\#(index)}"#)) }
        readConcurrently(database, "doc1")
        #expect(logSize(database) > 100_000)
        let started = Date()
        #expect(try database.compact())
        #expect(Date().timeIntervalSince(started) < 5, "the compaction waited for idle readers")
        // Truncated, then one page written after (the compacted file's slack, in its metadata).
        #expect(logSize(database) < 16_384)
        #expect(try database.document(DocumentID("doc49")).revision.revision.generation == 1)
    }
}

/// A number shared between threads.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func set(_ value: Int) { lock.withLock { count = value } }
    func add() { lock.withLock { count += 1 } }
}
