import ArgumentParser
import CouchCore
import CouchStore
import Foundation

/// The dump format: newline-delimited JSON. The first line is a header
/// (`{"couchette_dump":1,"db_name":...,"doc_count":...}`), then one line per document:
/// `{"id":...,"revisions":[...]}` holding every leaf revision (deleted ones too) as
/// replication carries it — `_rev`, `_deleted`, `_revisions` and attachments inline as
/// base64 (`data`, with `encoding` kept) — so that loading it with `new_edits=false`
/// rebuilds the same revision trees and attachment bytes. `_local` documents are not dumped.
enum DumpFormat {
    static let version = 1

    /// One document's line (without its newline).
    static func line(for id: DocumentID, in database: Database) throws -> [UInt8]? {
        guard let (record, _, stored) = try database.revisions(id, choosing: { $0.leaves.map(\.revision) }) else { return nil }
        let tree = record.tree
        var revisions: [JSONValue] = []
        for case let revision? in stored {
            var document: JSONObject = ["_id": JSONValue(id.rawValue), "_rev": JSONValue(revision.revision.description)]
            if case .object(let members)? = try? JSONValue.parse(revision.body) {
                for (key, value) in members { document[key] = value }
            }
            if revision.isDeleted { document["_deleted"] = true }
            document["_revisions"] = RevisionHistory(tree.history(of: revision.revision)).json
            if !revision.attachments.isEmpty {
                var attachments = JSONObject()
                for attachment in revision.attachments {
                    var meta: JSONObject = ["content_type": JSONValue(attachment.contentType),
                                            "revpos": JSONValue(attachment.revpos),
                                            "digest": JSONValue(attachment.digest),
                                            "length": JSONValue(attachment.length)]
                    if let encoding = attachment.encoding { meta["encoding"] = JSONValue(encoding) }
                    if attachment.isBodyAbsent {
                        // Replicated on demand and never fetched: kept as what it is, a stub.
                        meta["stub"] = true
                    } else {
                        meta["data"] = JSONValue(Base64.encode(try database.attachments.read(attachment.blobKey)))
                    }
                    attachments[attachment.name] = .object(meta)
                }
                document["_attachments"] = .object(attachments)
            }
            revisions.append(.object(document))
        }
        let line: JSONObject = ["id": JSONValue(id.rawValue), "revisions": .array(revisions)]
        return JSONValue.object(line).serialized()
    }
}

/// A progress line redrawn in place on a terminal (standard error), silent otherwise.
struct ProgressLine {
    let enabled = isatty(STDERR_FILENO) == 1
    var lastDraw = Date.distantPast

    mutating func show(_ done: Int, of total: Int?, force: Bool = false) {
        guard enabled, force || Date().timeIntervalSince(lastDraw) > 0.2 else { return }
        lastDraw = Date()
        var text = "\r\(done) documents"
        if let total, total > 0 {
            let fraction = min(1, Double(done) / Double(total))
            let filled = Int(fraction * 30)
            text = "\r[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled)
                + "] \(done)/\(total)"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }

    func finish() { if enabled { FileHandle.standardError.write(Data("\n".utf8)) } }
}

private func openDataDirectory(_ path: String) throws -> DatabaseManager {
    try DataDirectory.open(path) { server in
        "stop it first, or copy through it (a replication: couchette replicate --server \(server) ...)"
    }
}

private func databaseName(_ text: String) throws -> DatabaseName {
    do { return try DatabaseName(text) } catch { throw ValidationError("\(text) is not a database name") }
}

/// `couchette dump`: a database as newline-delimited JSON, read straight from the data directory.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a database as newline-delimited JSON (every leaf revision, its history and attachments).",
        discussion: """
            The first line is a header naming the database; then one line per document with all its leaf \
            revisions (conflicts and deletions included), their _revisions and their attachments in base64. \
            `couchette load` rebuilds the same revision trees from it. Documents are read one at a time. \
            Run it while no server uses the data directory. See docs/operations.md.
            """)

    @Option(name: .customLong("data-dir"), help: "The data directory (default ./data).")
    var dataDirectory = "./data"

    @Option(help: "The file to write (default: standard output).")
    var output: String?

    @Argument(help: "The database to dump.")
    var name: String

    func run() throws {
        let databases = try openDataDirectory(dataDirectory)
        let name = try databaseName(name)
        guard databases.exists(name) else { throw ValidationError("no database \(name.rawValue) in \(dataDirectory)") }
        let database = try databases.database(name)
        let info = try database.info()
        guard let file = output.map({ fopen($0, "w") }) ?? fdopen(STDOUT_FILENO, "w") else { throw ValidationError("cannot write \(output ?? "")") }
        defer { if output != nil { fclose(file) } }
        func write(_ bytes: [UInt8]) throws {
            let written = bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }
            guard written == bytes.count, fputc(0x0A, file) != EOF else { throw ValidationError("cannot write the dump") }
        }
        let header: JSONObject = ["couchette_dump": JSONValue(DumpFormat.version), "db_name": JSONValue(name.rawValue),
                                  "doc_count": JSONValue(info.documentCount), "doc_del_count": JSONValue(info.deletedDocumentCount)]
        try write(JSONValue.object(header).serialized())
        var progress = ProgressLine()
        var done = 0
        var since = 0
        // By sequence, in pages: each document once (its latest change), in constant memory.
        while true {
            let page = try database.changes(ChangesQuery(since: since, limit: 500))
            guard let last = page.last else { break }
            for row in page {
                if let line = try DumpFormat.line(for: row.id, in: database) { try write(line) }
                done += 1
                progress.show(done, of: info.documentCount + info.deletedDocumentCount)
            }
            since = last.sequence
        }
        guard fflush(file) == 0 else { throw ValidationError("cannot write the dump") }
        progress.show(done, of: info.documentCount + info.deletedDocumentCount, force: true)
        progress.finish()
    }
}

/// `couchette load`: a dump read back into a database of the data directory.
struct Load: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Read a database written by `couchette dump` (revisions written as replication writes them).",
        discussion: """
            Run it while no server uses the data directory. Lines are read and written one at a time. \
            See docs/operations.md.
            """)

    @Option(name: .customLong("data-dir"), help: "The data directory (default ./data).")
    var dataDirectory = "./data"

    @Option(help: "The dump to read (default: standard input).")
    var input: String?

    @Flag(help: "Create the database if it does not exist.")
    var create = false

    @Argument(help: "The database to load into (the dump's own name is only in its header).")
    var name: String

    func run() throws {
        let databases = try openDataDirectory(dataDirectory)
        let name = try databaseName(name)
        let database: Database
        if databases.exists(name) {
            database = try databases.database(name)
        } else if create {
            database = try databases.create(name)
        } else {
            throw ValidationError("no database \(name.rawValue) in \(dataDirectory) (--create makes it)")
        }
        guard let file = input.map({ fopen($0, "r") }) ?? fdopen(STDIN_FILENO, "r") else { throw ValidationError("cannot read \(input ?? "")") }
        defer { if input != nil { fclose(file) } }
        var buffer: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(buffer) }
        var lineNumber = 0
        var total: Int?
        var progress = ProgressLine()
        var failures = 0
        var pending: [(DocumentEdit, Int)] = []
        var pendingBytes = 0
        func flush() throws {
            guard !pending.isEmpty else { return }
            let results = try database.bulkUpdate(pending.map(\.0), newEdits: false, keepingAbsentBodies: true)
            for ((_, line), result) in zip(pending, results) {
                if case .failure(let error) = result {
                    failures += 1
                    FileHandle.standardError.write(Data("line \(line): \(error.error): \(error.reason)\n".utf8))
                }
            }
            pending = []
            pendingBytes = 0
        }
        while true {
            let count = getline(&buffer, &capacity, file)
            guard count >= 0, let buffer else { break }
            lineNumber += 1
            let bytes = UnsafeRawBufferPointer(start: buffer, count: count)
            guard bytes.contains(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D }) else { continue }
            guard let line = try? JSONValue.parse(Array(bytes)) else {
                throw ValidationError("line \(lineNumber) is not JSON")
            }
            if lineNumber == 1 {
                guard line["couchette_dump"]?.intValue == DumpFormat.version else {
                    throw ValidationError("not a couchette dump (its first line has no \"couchette_dump\":\(DumpFormat.version))")
                }
                total = (line["doc_count"]?.intValue ?? 0) + (line["doc_del_count"]?.intValue ?? 0)
                continue
            }
            guard let revisions = line["revisions"]?.arrayValue else {
                throw ValidationError("line \(lineNumber) has no \"revisions\"")
            }
            let edits = try revisions.map { revision in
                do throws(CouchError) { return try DocumentEdit(json: revision) } catch {
                    throw ValidationError("line \(lineNumber): \(error.reason)")
                }
            }
            pending += edits.map { ($0, lineNumber) }
            pendingBytes += count
            // Written in batches (one transaction each) of bounded size, not line by line.
            if pending.count >= 200 || pendingBytes >= 4 << 20 { try flush() }
            progress.show(lineNumber - 1, of: total)
        }
        try flush()
        guard ferror(file) == 0 else { throw ValidationError("cannot read the dump") }
        progress.show(max(0, lineNumber - 1), of: total, force: true)
        progress.finish()
        if failures > 0 { throw ExitCode(1) }
    }
}
