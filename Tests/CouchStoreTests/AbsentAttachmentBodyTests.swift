import CouchCore
import CouchStore
import CouchTestSupport
import Foundation
import Testing

/// An attachment stored with its body absent (a replication left it on its source): the
/// metadata survives reopening, only the right bytes fill it, and nothing half-written stays.
@Suite struct AbsentAttachmentBodyTests {
    let directory = TestServer.makeTemporaryDirectory()

    func blobFiles(_ database: Database) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: database.attachments.directory)) ?? []).filter { $0 != "staging" && $0 != "pending" }
            + ((try? FileManager.default.contentsOfDirectory(atPath: database.attachments.directory + "/staging")) ?? [])
    }

    @Test func anAbsentBodyIsFilledOnlyByBytesWithItsDigest() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let body = Array("the real body".utf8)
        let digest = AttachmentInfo.digestString(md5: Digest.md5(body))
        let stub = #"{"_id":"d","_rev":"2-b","_revisions":{"start":2,"ids":["b","a"]},"_attachments":{"a.txt":{"stub":true,"content_type":"text/plain","length":\#(body.count),"revpos":1,"digest":"\#(digest)"}}}"#
        let id = DocumentID("d")
        let revision = try #require(RevisionID("2-b"))
        do {
            let database = try DatabaseManager(directory: directory).create(try DatabaseName("db"))
            let refused = try database.bulkUpdate([try DocumentEdit(json: try JSONValue.parse(stub))], newEdits: false)
            guard case .failure(let error) = refused[0] else { Issue.record("a plain replicated stub needs an ancestor"); return }
            #expect(error.error == "missing_stub")
            let kept = try database.bulkUpdate([try DocumentEdit(json: try JSONValue.parse(stub))], newEdits: false,
                                               keepingAbsentBodies: true)
            guard case .success = kept[0] else { Issue.record("the stub is kept with its body absent"); return }
        }
        let database = try DatabaseManager(directory: directory).database(try DatabaseName("db"))
        let absent = try #require(try database.document(id).revision.attachments.first)
        #expect(absent.isBodyAbsent && absent.digest == digest && absent.length == body.count && absent.revpos == 1)
        #expect(throws: CouchError.self) { try database.attachments.read(absent.blobKey) }

        let wrong = try database.attachments.makeWriter()
        try wrong.write(Array("other bytes!!".utf8))
        #expect(throws: CouchError.self) { try database.fillAbsentBody(id, revision: revision, name: "a.txt", with: wrong) }
        #expect(blobFiles(database).isEmpty, "refused bytes leave nothing behind")
        #expect(try database.document(id).revision.attachments.first?.isBodyAbsent == true)

        let right = try database.attachments.makeWriter()
        try right.write(body)
        let filled = try database.fillAbsentBody(id, revision: revision, name: "a.txt", with: right)
        #expect(!filled.isBodyAbsent)
        let stored = try #require(try database.document(id).revision.attachments.first)
        #expect(try database.attachments.read(stored.blobKey) == body)
        #expect(database.updateSequence == 1, "filling a body is not a new revision")
    }
}
