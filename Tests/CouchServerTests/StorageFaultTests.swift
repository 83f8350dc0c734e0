import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// A full disk, played by the server process's file size limit (RLIMIT_FSIZE, set from
/// outside with prlimit; no root needed): writes of documents, attachments and `_local`
/// documents and a compaction fail with 507 `insufficient_storage` and CouchDB's JSON,
/// nothing committed is lost, the files stay sound, and once there is room again every
/// kind of write works.
@Suite struct StorageFaultTests {
    /// prlimit(2) on the server process (glibc declares it only for _GNU_SOURCE, so it is
    /// looked up by name).
    private func setFileSizeLimit(_ pid: Int32, _ bytes: UInt64) -> Bool {
        typealias PRLimit = @convention(c) (Int32, Int32, UnsafePointer<rlimit>?, UnsafeMutablePointer<rlimit>?) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prlimit") else { return false }
        let prlimit = unsafeBitCast(symbol, to: PRLimit.self)
        let resource = Int32(RLIMIT_FSIZE.rawValue)
        var current = rlimit()
        guard prlimit(pid, resource, nil, &current) == 0 else { return false }
        var limit = rlimit(rlim_cur: rlim_t(min(bytes, UInt64(current.rlim_max))), rlim_max: current.rlim_max)
        return prlimit(pid, resource, &limit, nil) == 0
    }

    private func largestFile(in directory: String) -> UInt64 {
        var largest: UInt64 = 0
        let enumerator = FileManager.default.enumerator(atPath: directory)
        while let file = enumerator?.nextObject() as? String {
            let size = (try? FileManager.default.attributesOfItem(atPath: directory + "/" + file))?[.size] as? UInt64 ?? 0
            largest = max(largest, size)
        }
        return largest
    }

    @Test func aFullDiskAnswers507AndLosesNothing() throws {
        let server = try ServerProcess(arguments: ["--log-level", "error"])
        defer { server.stop() }
        let pid = server.process.processIdentifier
        var port = server.port
        func request(_ method: String, _ path: String, type: String = "application/json", _ body: [UInt8]? = nil) throws -> HTTPTestResponse {
            try httpRequest(port: port, method, path, headers: [("Content-Type", type)], body: body)
        }
        #expect(try request("PUT", "/full").status == 201)
        var acknowledged: [String: String] = [:]
        let padding = String(repeating: "p", count: 20_000)
        for index in 0..<20 {
            let response = try request("PUT", "/full/before\(index)", Array(#"{"n":\#(index),"pad":"\#(padding)"}"#.utf8))
            #expect(response.status == 201)
            acknowledged["before\(index)"] = try JSONValue.parse(response.body)["rev"]?.stringValue
        }

        // Files may grow a little more: then the disk is full.
        let limit = largestFile(in: server.directory) + 64 * 1024
        #expect(setFileSizeLimit(pid, limit))
        var refused: [String] = []
        var statuses: [Int: Int] = [:]
        for index in 0..<400 where refused.count < 5 {
            let id = "during\(index)"
            let response = try request("PUT", "/full/\(id)", Array(#"{"n":\#(index),"pad":"\#(padding)"}"#.utf8))
            statuses[response.status, default: 0] += 1
            if response.status == 201 {
                acknowledged[id] = try JSONValue.parse(response.body)["rev"]?.stringValue
            } else {
                #expect(response.status == 507, "\(response.text)")
                #expect(try JSONValue.parse(response.body)["error"] == "insufficient_storage", "\(response.text)")
                refused.append(id)
            }
        }
        #expect(refused.count == 5, "the disk never filled up: \(statuses)")
        // Every other kind of write is refused the same way, and nothing is left of it.
        let big = [UInt8](repeating: 7, count: Int(limit) + 100_000)
        let upload = try request("PUT", "/full/attached/big.bin", type: "application/octet-stream", big)
        #expect(upload.status == 507, "\(upload.text)")
        #expect(try JSONValue.parse(upload.body)["error"] == "insufficient_storage")
        let bulk = try request("POST", "/full/_bulk_docs", Array(#"{"docs":[{"_id":"bulk","pad":"\#(padding)\#(padding)\#(padding)"}]}"#.utf8))
        #expect(bulk.status == 201 || bulk.status == 507, "\(bulk.text)")
        let bulkRefused = bulk.status == 507 || (try? JSONValue.parse(bulk.body)[0]?["error"]) == "insufficient_storage"
        #expect(bulkRefused, "\(bulk.text)")
        #expect(try request("POST", "/full/_compact").status == 202)
        // The server is still up and serves everything it acknowledged.
        for (id, rev) in acknowledged {
            let document = try JSONValue.parse(try request("GET", "/full/\(id)").body)
            #expect(document["_rev"]?.stringValue == rev, "\(id)")
        }
        for id in refused + ["attached", "bulk"] {
            #expect(try request("GET", "/full/\(id)").status == 404, "\(id) was refused yet is there")
        }
        let blobs = DatabaseFiles.blobs(of: "full", in: server.directory)
        #expect(blobs.stored.isEmpty && blobs.staging.isEmpty, "\(blobs)")

        // Room again: documents, attachments, `_local` documents and compaction work.
        #expect(setFileSizeLimit(pid, UInt64.max))
        let after = try request("PUT", "/full/after", Array(#"{"n":1}"#.utf8))
        #expect(after.status == 201, "\(after.text)")
        acknowledged["after"] = try JSONValue.parse(after.body)["rev"]?.stringValue
        let attached = try request("PUT", "/full/attached/big.bin", type: "application/octet-stream", big)
        #expect(attached.status == 201, "\(attached.text)")
        acknowledged["attached"] = try JSONValue.parse(attached.body)["rev"]?.stringValue
        #expect(try request("PUT", "/full/_local/checkpoint", Array(#"{"seq":1}"#.utf8)).status == 201)
        #expect(try request("POST", "/full/_compact").status == 202)

        // After a restart, the files are sound and hold exactly what was acknowledged.
        server.stop(keepData: true)
        for file in DatabaseFiles.sqliteFiles(in: server.directory) {
            #expect(DatabaseFiles.integrityCheck(file) == "ok", "\(file)")
        }
        let restarted = try ServerProcess(arguments: ["--log-level", "error"], directory: server.directory)
        defer { restarted.stop() }
        port = restarted.port
        let rows = try JSONValue.parse(try request("GET", "/full/_all_docs").body)["rows"]?.arrayValue ?? []
        #expect(Set(rows.compactMap { $0["id"]?.stringValue }) == Set(acknowledged.keys))
        for row in rows {
            let id = row["id"]?.stringValue ?? ""
            #expect(row["value"]?["rev"]?.stringValue == acknowledged[id], "\(id)")
        }
        #expect(try request("GET", "/full/attached/big.bin").body == big)
    }
}
