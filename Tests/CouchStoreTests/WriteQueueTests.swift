import CouchCore
@testable import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// A write that fails half-way leaves nothing of itself behind (its savepoint is rolled back),
/// even alone in its batch, and the writer goes on writing. Writers at once share commits.
@Suite struct WriteQueueTests {
    let directory = TestServer.makeTemporaryDirectory()
    struct HalfWayFailure: Error {}

    @Test func aLoneWriteThatFailsHalfWayLeavesNothingBehind() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manager = try DatabaseManager(directory: directory)
        let database = try manager.create(try DatabaseName("lone"))
        #expect(throws: HalfWayFailure.self) {
            try database.writer.perform { transaction in
                try transaction.connection.run("INSERT INTO metadata (key, value) VALUES ('half', 'written')")
                throw HalfWayFailure()
            }
        }
        let left = try database.readers.withConnection { try $0.scalarInt("SELECT count(*) FROM metadata WHERE key = 'half'") }
        #expect(left == 0)
        var edit = try DocumentEdit(json: try JSONValue.parse("{}"))
        edit.id = DocumentID("after")
        _ = try database.update(edit)
        #expect(database.updateSequence == 1)
        #expect(try database.info().documentCount == 1)
    }

    /// Ten writers, each writing as soon as its last write is acknowledged, share commits, and
    /// every acknowledged write is there once the database is opened again. (Here about ten
    /// writes a commit, five when leaders did not wait for company, 400 if none were shared;
    /// the bound leaves room for a loaded machine.)
    @Test func writersAtOnceShareCommitsAndKeepEveryWrite() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writers = 10, writesEach = 40
        do {
            let manager = try DatabaseManager(directory: directory)
            let database = try manager.create(try DatabaseName("shared"))
            let commitsBefore = database.writer.commitCount
            let finished = DispatchGroup()
            for writer in 0..<writers {
                finished.enter()
                Thread {
                    for index in 0..<writesEach {
                        var edit = DocumentEdit(id: DocumentID("w\(writer)-\(index)"))
                        edit.body = ["writer": JSONValue(writer)]
                        _ = try? database.update(edit)
                    }
                    finished.leave()
                }.start()
            }
            finished.wait()
            let commits = database.writer.commitCount - commitsBefore
            #expect(commits <= writers * writesEach / 4, "\(commits) commits for \(writers * writesEach) writes")
            manager.ownership.release()
        }
        let reopened = try DatabaseManager(directory: directory).database(try DatabaseName("shared"))
        #expect(try reopened.info().documentCount == writers * writesEach)
        #expect(reopened.updateSequence == writers * writesEach)
    }
}
