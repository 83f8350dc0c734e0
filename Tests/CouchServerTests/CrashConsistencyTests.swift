import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// SIGKILL to a real `couchette serve` at random moments while writers use every write
/// path (single PUTs and updates, `_bulk_docs`, attachment uploads, `multipart/related`
/// PUTs, `_local` checkpoints) and compactions run, over and over. After each kill:
/// SQLite's integrity check passes on every file, and after the restart every
/// acknowledged write is there with its exact revision, body and attachment bytes, while
/// writes that were never answered are either absent or whole. At the end, a compaction
/// leaves exactly the attachment bodies that documents refer to.
///
/// `scripts/crash-campaign` runs the same campaign for longer (`COUCHETTE_CRASH_CYCLES`).
@Suite struct CrashConsistencyTests {
    static let cycles = ProcessInfo.processInfo.environment["COUCHETTE_CRASH_CYCLES"].flatMap(Int.init) ?? 20

    @Test func acknowledgedWritesSurviveSIGKILL() throws {
        let campaign = CrashCampaign(seed: UInt64.random(in: 1...UInt64.max))
        try campaign.run(cycles: Self.cycles)
        let report = campaign.report
        #expect(report.failures.isEmpty, "seed \(campaign.seed): \(report.failures.prefix(20).joined(separator: "\n"))")
        // The campaign must have written through every path and killed the server mid-way.
        #expect(report.acknowledged > 200, "seed \(campaign.seed): \(report)")
        #expect(report.acknowledgedAttachments > 10, "seed \(campaign.seed): \(report)")
        #expect(report.kills == Self.cycles)
        print("crash campaign: \(report)")
    }
}

/// What one writer expects of a document it wrote.
struct ExpectedDocument: Sendable {
    /// The revision the server acknowledged; nil for a write that was never answered.
    var rev: String?
    var n: Int
    /// Attachment name → (length, seed) of its bytes.
    var attachments: [String: ExpectedAttachment] = [:]
}

struct ExpectedAttachment: Sendable, Hashable {
    let length: Int
    let seed: UInt64
    let digest: String
    init(length: Int, seed: UInt64) {
        self.length = length
        self.seed = seed
        digest = AttachmentInfo.digestString(md5: Digest.md5(CrashCampaign.bytes(length, seed: seed)))
    }
    var bytes: [UInt8] { CrashCampaign.bytes(length, seed: seed) }
}

/// The campaign's bookkeeping, shared by the writer threads.
final class CrashCampaign: @unchecked Sendable {
    struct Report: CustomStringConvertible {
        var kills = 0
        var acknowledged = 0
        var acknowledgedAttachments = 0
        var unanswered = 0
        var unansweredPresent = 0
        /// Attachment bodies kills left marked (stored by writes not settled), swept at the next open.
        var marksLeft = 0
        var failures: [String] = []
        var description: String {
            "\(kills) kills, \(acknowledged) acknowledged writes (\(acknowledgedAttachments) with attachments), "
                + "\(unanswered) unanswered (\(unansweredPresent) found committed), "
                + "\(marksLeft) attachment bodies of unsettled writes checked at restart, \(failures.count) failures"
        }
    }

    let seed: UInt64
    private let lock = NSLock()
    private var random: SplitMix
    /// Documents created once and never changed again.
    private var created: [String: ExpectedDocument] = [:]
    /// Documents that were sent but never answered: absent or whole after the restart.
    private var unanswered: [String: ExpectedDocument] = [:]
    /// A document each updater keeps editing, and a `_local` checkpoint each keeps moving:
    /// the acknowledged state, and the state of an unanswered edit, if any.
    private var updated: [String: (acknowledged: ExpectedDocument, pending: ExpectedDocument?)] = [:]
    private var checkpoints: [String: (acknowledged: Int?, rev: String?, pending: Int?)] = [:]
    private(set) var report = Report()
    private let directory = TestServer.makeTemporaryDirectory()
    private let database = "crash"

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix(seed)
    }

    private func fail(_ message: String) { lock.withLock { report.failures.append(message) } }
    private func nextRandom(_ range: ClosedRange<Int>) -> Int { lock.withLock { Int.random(in: range, using: &random) } }

    func run(cycles: Int) throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var verifiedBytes: Set<String> = []
        for cycle in 0..<cycles {
            let server = try ServerProcess(arguments: ["--log-level", "error"], directory: directory)
            let port = server.port

            if cycle == 0 {
                #expect(try httpRequest(port: port, "PUT", "/\(database)").status == 201)
            }
            verify(port: port, cycle: cycle, downloadedBefore: &verifiedBytes)
            checkNoMarks(cycle: cycle)
            try synchronizeEditors(port: port)
            guard lock.withLock({ report.failures.isEmpty }) else {
                server.stop(keepData: true)
                return
            }
            // Writers until the kill, which comes at a random moment.
            let stop = StopFlag()
            let group = DispatchGroup()
            let writers: [Writer] = [.put, .put, .bulk, .attachment, .multipart, .updater, .checkpointer, .compactor]
            for (index, writer) in writers.enumerated() {
                group.enter()
                Thread {
                    defer { group.leave() }
                    self.run(writer, port: port, writer: cycle * 100 + index, stop: stop)
                }.start()
            }
            // The kill comes once this cycle has written something (however loaded the
            // machine), at a random moment after that.
            let before = lock.withLock { report.acknowledged }
            let deadline = Date().addingTimeInterval(30)
            while lock.withLock({ report.acknowledged }) < before + 20, Date() < deadline { usleep(5_000) }
            usleep(UInt32(nextRandom(0...500)) * 1000)
            kill(server.process.processIdentifier, SIGKILL)
            server.process.waitUntilExit()
            stop.set()
            if group.wait(timeout: .now() + 60) == .timedOut { fail("cycle \(cycle): writers did not stop after the kill") }
            lock.withLock { report.kills += 1 }
            _ = server.stop(keepData: true)
            for file in DatabaseFiles.sqliteFiles(in: directory) {
                let verdict = DatabaseFiles.integrityCheck(file)
                if verdict != "ok" { fail("cycle \(cycle): integrity_check of \(file): \(verdict)") }
            }
            let marks = marked().count
            lock.withLock { report.marksLeft += marks }
        }
        // A last restart checks the last kill, then a compaction must leave exactly the
        // attachment bodies documents refer to.
        let server = try ServerProcess(arguments: ["--log-level", "error"], directory: directory)
        defer { server.stop(keepData: true) }
        verify(port: server.port, cycle: cycles, downloadedBefore: &verifiedBytes)
        checkNoMarks(cycle: cycles)
        checkBlobsAfterCompaction(port: server.port)
    }

    /// The marks of attachment bodies whose writes had not settled (see `AttachmentStore`).
    private func marked() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory + "/" + database + ".attachments/pending")) ?? []
    }

    /// Once the database is open again (and before any write), the marks a kill left were
    /// checked: every body they named is referenced or gone.
    private func checkNoMarks(cycle: Int) {
        let marks = marked()
        if !marks.isEmpty { fail("cycle \(cycle): \(marks.count) attachment bodies of unsettled writes not checked at open") }
    }

    // MARK: Writers

    enum Writer { case put, bulk, attachment, multipart, updater, checkpointer, compactor }

    private func run(_ kind: Writer, port: Int, writer: Int, stop: StopFlag) {
        switch kind {
        case .put: putWriter(port: port, writer: writer, stop: stop)
        case .bulk: bulkWriter(port: port, writer: writer, stop: stop)
        case .attachment: attachmentWriter(port: port, writer: writer, stop: stop)
        case .multipart: multipartWriter(port: port, writer: writer, stop: stop)
        case .updater: updater(port: port, writer: writer, stop: stop)
        case .checkpointer: checkpointer(port: port, writer: writer, stop: stop)
        case .compactor: compactor(port: port, writer: writer, stop: stop)
        }
    }

    private func json(_ object: String) -> [UInt8] { Array(object.utf8) }

    /// Sends a write; nil when no answer came (the server is gone).
    private func send(_ connection: HTTPTestConnection, _ method: String, _ path: String,
                      contentType: String = "application/json", body: [UInt8]) -> HTTPTestResponse? {
        try? connection.request(method, path, headers: [("Content-Type", contentType)], body: body)
    }

    /// An answer other than success (or no answer) is a finding unless the server is gone.
    private func refused(_ response: HTTPTestResponse, _ what: String, stop: StopFlag) {
        if !stop.isSet { fail("\(what): \(response.status) \(response.text.prefix(300))") }
    }

    private func putWriter(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        for index in 0... {
            let id = "put-\(writer)-\(index)"
            let expected = ExpectedDocument(rev: nil, n: index)
            lock.withLock { unanswered[id] = expected }
            guard let response = send(connection, "PUT", "/\(database)/\(id)", body: json(#"{"n":\#(index)}"#)) else { return }
            guard response.status == 201, let rev = try? JSONValue.parse(response.body)["rev"]?.stringValue else {
                return refused(response, "PUT \(id)", stop: stop)
            }
            acknowledge(id, ExpectedDocument(rev: rev, n: index))
        }
    }

    private func bulkWriter(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        for batch in 0... {
            let ids = (0..<10).map { "bulk-\(writer)-\(batch)-\($0)" }
            lock.withLock { for (n, id) in ids.enumerated() { unanswered[id] = ExpectedDocument(rev: nil, n: n) } }
            let docs = ids.enumerated().map { #"{"_id":"\#($1)","n":\#($0)}"# }.joined(separator: ",")
            guard let response = send(connection, "POST", "/\(database)/_bulk_docs", body: json(#"{"docs":[\#(docs)]}"#)) else { return }
            guard response.status == 201, let rows = try? JSONValue.parse(response.body).arrayValue, rows.count == ids.count else {
                return refused(response, "_bulk_docs", stop: stop)
            }
            for (n, row) in rows.enumerated() {
                guard row["id"]?.stringValue == ids[n], let rev = row["rev"]?.stringValue else {
                    return fail("_bulk_docs row \(n): \(row.serializedString())")
                }
                acknowledge(ids[n], ExpectedDocument(rev: rev, n: n))
            }
        }
    }

    /// Standalone attachment uploads, each creating a document.
    private func attachmentWriter(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        for index in 0... {
            let id = "att-\(writer)-\(index)"
            let attachment = ExpectedAttachment(length: nextRandom(1...200_000), seed: UInt64(truncatingIfNeeded: id.hashValue))
            var expected = ExpectedDocument(rev: nil, n: -1, attachments: ["blob.bin": attachment])
            lock.withLock { unanswered[id] = expected }
            guard let response = send(connection, "PUT", "/\(database)/\(id)/blob.bin", contentType: "application/octet-stream",
                                      body: attachment.bytes) else { return }
            guard response.status == 201, let rev = try? JSONValue.parse(response.body)["rev"]?.stringValue else {
                return refused(response, "PUT \(id)/blob.bin", stop: stop)
            }
            expected.rev = rev
            acknowledge(id, expected)
        }
    }

    /// `multipart/related` PUTs of a document with two attachments.
    private func multipartWriter(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        let boundary = "crash-boundary-\(writer)"
        for index in 0... {
            let id = "multi-\(writer)-\(index)"
            let first = ExpectedAttachment(length: nextRandom(0...120_000), seed: UInt64(truncatingIfNeeded: (id + "a").hashValue))
            let second = ExpectedAttachment(length: nextRandom(1...4_000), seed: UInt64(truncatingIfNeeded: (id + "b").hashValue))
            var expected = ExpectedDocument(rev: nil, n: index, attachments: ["a.bin": first, "b.bin": second])
            lock.withLock { unanswered[id] = expected }
            var body = Array("--\(boundary)\r\nContent-Type: application/json\r\n\r\n".utf8)
            body += json(#"{"n":\#(index),"_attachments":{"a.bin":{"follows":true,"content_type":"application/octet-stream","length":\#(first.length)},"b.bin":{"follows":true,"content_type":"application/octet-stream","length":\#(second.length)}}}"#)
            body += Array("\r\n--\(boundary)\r\n\r\n".utf8) + first.bytes
            body += Array("\r\n--\(boundary)\r\n\r\n".utf8) + second.bytes + Array("\r\n--\(boundary)--".utf8)
            guard let response = send(connection, "PUT", "/\(database)/\(id)",
                                      contentType: "multipart/related; boundary=\"\(boundary)\"", body: body) else { return }
            guard response.status == 201, let rev = try? JSONValue.parse(response.body)["rev"]?.stringValue else {
                return refused(response, "multipart PUT \(id)", stop: stop)
            }
            expected.rev = rev
            acknowledge(id, expected)
        }
    }

    /// Edits one document over and over, with inline attachments now and then.
    private func updater(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        let id = "updated"
        while true {
            guard let current = lock.withLock({ updated[id]?.acknowledged }) else { return }
            var next = ExpectedDocument(rev: nil, n: current.n + 1)
            var inline = ""
            if next.n % 3 == 0 {
                let attachment = ExpectedAttachment(length: nextRandom(1...3_000), seed: UInt64(next.n))
                next.attachments["inline.bin"] = attachment
                inline = #","_attachments":{"inline.bin":{"content_type":"application/octet-stream","data":"\#(Base64.encode(attachment.bytes))"}}"#
            }
            lock.withLock { updated[id]?.pending = next }
            let body = #"{"_rev":"\#(current.rev ?? "")","n":\#(next.n)\#(inline)}"#
            guard let response = send(connection, "PUT", "/\(database)/\(id)", body: json(body)) else { return }
            guard response.status == 201, let rev = try? JSONValue.parse(response.body)["rev"]?.stringValue else {
                return refused(response, "update \(id)", stop: stop)
            }
            next.rev = rev
            lock.withLock {
                updated[id] = (next, nil)
                report.acknowledged += 1
                if !next.attachments.isEmpty { report.acknowledgedAttachments += 1 }
            }
        }
    }

    /// Moves a `_local` checkpoint forward, as a replicator does.
    private func checkpointer(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        let id = "checkpoint"
        while true {
            guard let current = lock.withLock({ checkpoints[id] }) else { return }
            let next = (current.acknowledged ?? 0) + 1
            lock.withLock { checkpoints[id]?.pending = next }
            let rev = current.rev.map { #","_rev":"\#($0)""# } ?? ""
            guard let response = send(connection, "PUT", "/\(database)/_local/\(id)", body: json(#"{"seq":\#(next)\#(rev)}"#)) else { return }
            guard response.status == 201, let newRev = try? JSONValue.parse(response.body)["rev"]?.stringValue else {
                return refused(response, "_local/\(id)", stop: stop)
            }
            lock.withLock {
                checkpoints[id] = (next, newRev, nil)
                report.acknowledged += 1
            }
        }
    }

    private func compactor(port: Int, writer: Int, stop: StopFlag) {
        guard let connection = try? HTTPTestConnection(port: port, timeout: 20) else { return }
        defer { connection.close() }
        while !stop.isSet {
            guard let response = send(connection, "POST", "/\(database)/_compact", body: []) else { return }
            guard response.status == 202 else { return refused(response, "_compact", stop: stop) }
            usleep(UInt32(nextRandom(20...200)) * 1000)
        }
    }

    private func acknowledge(_ id: String, _ expected: ExpectedDocument) {
        lock.withLock {
            unanswered[id] = nil
            created[id] = expected
            report.acknowledged += 1
            if !expected.attachments.isEmpty { report.acknowledgedAttachments += 1 }
        }
    }

    // MARK: Checks

    private func get(_ port: Int, _ path: String) -> HTTPTestResponse? { try? httpRequest(port: port, "GET", path) }

    /// After a restart: the editors' documents are where an acknowledged or unanswered
    /// edit left them; from there they continue.
    private func synchronizeEditors(port: Int) throws {
        for id in ["updated"] {
            if lock.withLock({ updated[id] }) == nil {
                let response = try httpRequest(port: port, "PUT", "/\(database)/\(id)", headers: [("Content-Type", "application/json")],
                                               body: json(#"{"n":0}"#))
                let rev = try JSONValue.parse(response.body)["rev"]?.stringValue
                lock.withLock { updated[id] = (ExpectedDocument(rev: rev, n: 0), nil) }
            }
        }
        for id in ["checkpoint"] where lock.withLock({ checkpoints[id] }) == nil {
            lock.withLock { checkpoints[id] = (nil, nil, nil) }
        }
    }

    /// Checks every document the campaign wrote against what the server serves.
    private func verify(port: Int, cycle: Int, downloadedBefore: inout Set<String>) {
        let (acknowledged, doubtful, edited, moved) = lock.withLock { (created, unanswered, updated, checkpoints) }
        var present = 0
        var committedUnanswered: [String: ExpectedDocument] = [:]
        // Every document as listed, to check those already checked in depth after an earlier
        // restart by revision, body and attachment digests, without a request each.
        var listed: [String: JSONValue] = [:]
        if let response = get(port, "/\(database)/_all_docs?include_docs=true"),
           let rows = try? JSONValue.parse(response.body)["rows"]?.arrayValue {
            for row in rows { if let id = row["id"]?.stringValue, let doc = row["doc"] { listed[id] = doc } }
        } else {
            fail("cycle \(cycle): _all_docs unreadable")
        }
        // Acknowledged documents: the exact revision and body, attachments by digest, and in
        // depth (every leaf available, the attachment bytes) once, after the restart that
        // follows their write.
        for (id, expected) in acknowledged {
            // (A listed body proves a plain document whole; those with attachments get more.)
            if downloadedBefore.contains(id) || expected.attachments.isEmpty {
                guard let document = listed[id] else {
                    fail("cycle \(cycle): \(id) acknowledged but not listed")
                    continue
                }
                checkFields(document, id: id, expected, cycle: cycle)
                downloadedBefore.insert(id)
            } else {
                guard checkDocument(port: port, id: id, expected, cycle: cycle, mustExist: true, download: true) != nil else { continue }
                downloadedBefore.insert(id)
            }
            present += 1
        }
        // Unanswered ones: absent, or whole at their first revision.
        for (id, expected) in doubtful where listed[id] != nil {
            guard let document = checkDocument(port: port, id: id, expected, cycle: cycle, mustExist: false, download: true) else { continue }
            var committed = expected
            committed.rev = document["_rev"]?.stringValue
            committedUnanswered[id] = committed
            downloadedBefore.insert(id)
            present += 1
        }
        lock.withLock {
            report.unanswered += doubtful.count
            report.unansweredPresent += committedUnanswered.count
            // A committed unanswered write is now simply a document that must stay.
            for (id, expected) in committedUnanswered { created[id] = expected }
            for id in doubtful.keys { unanswered[id] = nil }
        }
        // The edited document: the acknowledged revision, or the unanswered edit, whole.
        for (id, state) in edited {
            guard let response = get(port, "/\(database)/\(id)"), response.status == 200,
                  let document = try? JSONValue.parse(response.body) else {
                fail("cycle \(cycle): \(id) unreadable")
                continue
            }
            let rev = document["_rev"]?.stringValue
            var now = state.acknowledged
            if rev != state.acknowledged.rev {
                guard let pending = state.pending, document["n"]?.intValue == pending.n,
                      generation(rev) == generation(state.acknowledged.rev) + 1 else {
                    fail("cycle \(cycle): \(id) at \(rev ?? "-") n=\(document["n"]?.intValue ?? -1), acknowledged \(state.acknowledged.rev ?? "-") n=\(state.acknowledged.n)")
                    continue
                }
                now = pending
                now.rev = rev
            }
            _ = checkDocument(port: port, id: id, now, cycle: cycle, mustExist: true, download: true)
            lock.withLock { updated[id] = (now, nil) }
        }
        // The checkpoint: the acknowledged value or the unanswered one.
        for (id, state) in moved {
            guard let response = get(port, "/\(database)/_local/\(id)") else { continue }
            let document = try? JSONValue.parse(response.body)
            let seq = response.status == 200 ? document?["seq"]?.intValue : nil
            if seq != state.acknowledged && (seq == nil || seq != state.pending) {
                fail("cycle \(cycle): _local/\(id) at \(seq.map(String.init) ?? "none"), acknowledged \(state.acknowledged.map(String.init) ?? "none")")
            }
            lock.withLock { checkpoints[id] = (seq, document?["_rev"]?.stringValue, nil) }
        }
        // Nothing else is there: every document listed is one the campaign knows.
        if listed.count != present + edited.count {
            let known = Set(acknowledged.keys).union(committedUnanswered.keys).union(edited.keys)
            let strangers = listed.keys.filter { !known.contains($0) }
            fail("cycle \(cycle): _all_docs lists \(listed.count) documents, expected \(present + edited.count); unknown: \(strangers.prefix(5))")
        }
    }

    /// Revision, body and attachment stubs as expected; false when the attachments differ.
    @discardableResult
    private func checkFields(_ document: JSONValue, id: String, _ expected: ExpectedDocument, cycle: Int) -> Bool {
        if let rev = expected.rev, document["_rev"]?.stringValue != rev {
            fail("cycle \(cycle): \(id) at \(document["_rev"]?.stringValue ?? "-"), acknowledged \(rev)")
        } else if expected.rev == nil, generation(document["_rev"]?.stringValue) != 1 {
            fail("cycle \(cycle): unanswered \(id) at \(document["_rev"]?.stringValue ?? "-")")
        }
        if expected.n >= 0, document["n"]?.intValue != expected.n {
            fail("cycle \(cycle): \(id) body \(document.serializedString().prefix(200)), expected n=\(expected.n)")
        }
        let stubs = document["_attachments"]?.objectValue
        if Set(stubs?.keys ?? []) != Set(expected.attachments.keys) {
            fail("cycle \(cycle): \(id) attachments \(stubs?.keys ?? []), expected \(expected.attachments.keys.sorted())")
            return false
        }
        for (name, attachment) in expected.attachments {
            let stub = stubs?[name]
            if stub?["digest"]?.stringValue != attachment.digest || stub?["length"]?.intValue != attachment.length {
                fail("cycle \(cycle): \(id)/\(name) stub \(stub?.serializedString() ?? "-"), expected \(attachment.digest) \(attachment.length)")
            }
        }
        return true
    }

    /// One document: its revision (when known), body and attachments, every leaf readable.
    /// Returns the document when it exists.
    private func checkDocument(port: Int, id: String, _ expected: ExpectedDocument, cycle: Int, mustExist: Bool,
                               download: Bool) -> JSONValue? {
        guard let response = get(port, "/\(database)/\(id)?revs_info=true") else {
            fail("cycle \(cycle): GET \(id) got no answer")
            return nil
        }
        if response.status == 404, !mustExist { return nil }
        guard response.status == 200, let document = try? JSONValue.parse(response.body) else {
            fail("cycle \(cycle): \(id) \(mustExist ? "acknowledged" : "unanswered") but \(response.status) \(response.text.prefix(200))")
            return nil
        }
        // No revision without its body: the winner's revs_info says it is available.
        if document["_revs_info"]?.arrayValue?.first?["status"]?.stringValue != "available" {
            fail("cycle \(cycle): \(id) winner not available: \(response.text.prefix(300))")
        }
        guard checkFields(document, id: id, expected, cycle: cycle) else { return document }
        for (name, attachment) in expected.attachments where download {
            let body = get(port, "/\(database)/\(id)/\(name)")
            if body?.status != 200 || body?.body != attachment.bytes {
                fail("cycle \(cycle): \(id)/\(name) bytes differ (\(body?.status ?? 0), \(body?.body.count ?? -1) of \(attachment.length))")
            }
        }
        return document
    }

    /// After a compaction, the bodies on disk are exactly those the documents refer to.
    private func checkBlobsAfterCompaction(port: Int) {
        let compact = try? httpRequest(port: port, "POST", "/\(database)/_compact", headers: [("Content-Type", "application/json")])
        if compact?.status != 202 { fail("final _compact: \(compact?.status ?? 0)") }
        // The compaction runs after its 202: wait for its outcome, not for a flag it may not have set yet.
        let documents = lock.withLock { Array(created.values) + updated.values.map(\.acknowledged) }
        let referenced = Set(documents.flatMap { $0.attachments.values.map(\.digest) })
        var blobs = DatabaseFiles.blobs(of: database, in: directory)
        let deadline = Date().addingTimeInterval(60)
        while blobs.stored.count != referenced.count, Date() < deadline {
            usleep(50_000)
            blobs = DatabaseFiles.blobs(of: database, in: directory)
        }
        if blobs.stored.count != referenced.count || !blobs.staging.isEmpty {
            fail("after compaction: \(blobs.stored.count) attachment bodies stored, \(referenced.count) referenced, \(blobs.staging.count) staging files")
        }
    }

    private func generation(_ rev: String?) -> Int { Int(rev?.prefix { $0 != "-" } ?? "") ?? 0 }

    /// Deterministic bytes for an attachment, so the campaign keeps seeds, not bodies.
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix(seed)
        var result = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = generator.next()
            for _ in 0..<8 where index < count {
                result[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
        return result
    }
}

final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// A small seeded generator, so a failing campaign can be replayed from its seed.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
