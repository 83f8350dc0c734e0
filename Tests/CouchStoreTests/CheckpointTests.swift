import CouchCore
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// The write-ahead log is copied into the database file beside the writer, once it passes
/// 1,000 pages: what a user checks is that the copy happens without further writes, that the
/// log keeps its usual length under a steady writer, and that every write is there after.
@Suite struct CheckpointTests {
    let directory = TestServer.makeTemporaryDirectory()

    func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    func documents(_ prefix: String, count: Int, bytes: Int) throws -> [DocumentEdit] {
        let filler = String(repeating: "x", count: bytes)
        return try (0..<count).map { index in
            var edit = try DocumentEdit(json: try JSONValue.parse(#"{"text":"\#(filler)"}"#))
            edit.id = DocumentID("\(prefix)\(index)")
            return edit
        }
    }

    /// One commit of about 1,300 pages (5 MB) leaves the log past its threshold; the database
    /// file receives it within seconds, though nothing is written after.
    @Test func aLongLogIsCopiedIntoTheDatabaseWithoutAnotherWrite() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("copied"))
        let before = fileSize(database.path)
        let results = try database.bulkUpdate(try documents("doc", count: 600, bytes: 8_000), newEdits: true)
        #expect(results.allSatisfy { (try? $0.get()) != nil })
        #expect(fileSize(database.path + "-wal") > 4_000_000, "the batch did not reach the log")
        let deadline = Date().addingTimeInterval(10)
        while fileSize(database.path) < before + 4_000_000, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        #expect(fileSize(database.path) >= before + 4_000_000, "the database file is \(fileSize(database.path)) bytes")
        #expect(try database.info().documentCount == 600)
    }

    /// A writer committing one document after another, faster than a checkpoint copies 1,000
    /// pages, keeps the log near its threshold (4 MB) instead of letting it grow: the pages it
    /// commits while a checkpoint runs beside it are copied before the log can start again.
    /// Every write is there when the database is opened again.
    @Test func aSteadyWriterKeepsTheLogAtItsUsualLength() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var largest = 0
        do {
            let manager = try DatabaseManager(directory: directory)
            let database = try manager.create(try DatabaseName("steady"))
            for edit in try documents("doc", count: 2_000, bytes: 6_000) {
                _ = try database.update(edit)
                largest = max(largest, fileSize(database.path + "-wal"))
            }
            manager.ownership.release()
        }
        // Within SQLite's journal_size_limit of 6 MiB; 8 MB and more when the log grew past it.
        #expect(largest < 6 << 20, "the log grew to \(largest) bytes")
        let reopened = try DatabaseManager(directory: directory).database(try DatabaseName("steady"))
        #expect(try reopened.info().documentCount == 2_000)
    }
}
