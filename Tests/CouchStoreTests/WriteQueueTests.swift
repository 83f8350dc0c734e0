import CouchCore
@testable import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// A write that fails half-way leaves nothing of itself behind (its savepoint is rolled back),
/// even alone in its batch, and the writer goes on writing.
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
}
