@testable import CouchServer
import Foundation
import Logging
import Testing

/// The server's log lines: swift-log's standard format, one whole line per message however
/// many threads log at once (every request logs one at the default level).
@Suite struct StandardErrorLogHandlerTests {
    /// A logger writing to a new file; its lines are read back from the file.
    private func logger(label: String, into path: String) throws -> (Logger, Int32) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        let logger = Logger(label: label) { StandardErrorLogHandler(label: $0, descriptor: descriptor) }
        return (logger, descriptor)
    }

    private func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString)").path
    }

    @Test func aLineHasTheTimeLevelLabelMetadataSourceAndMessage() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        var (logger, descriptor) = try logger(label: "couchette.test", into: path)
        defer { close(descriptor) }
        logger[metadataKey: "b"] = "2"
        let before = Date()
        logger.warning("héllo \"world\"", metadata: ["a": "1"])
        logger.warning("plain")
        let after = Date()
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3 && lines[2].isEmpty)
        let stamp = #/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}) /#
        let first = try #require(lines[0].prefixMatch(of: stamp))
        #expect(lines[0].dropFirst(first.output.0.count) == #"warning couchette.test: a=1 b=2 [CouchServerTests] héllo "world""#)
        let second = try #require(lines[1].prefixMatch(of: stamp))
        #expect(lines[1].dropFirst(second.output.0.count) == "warning couchette.test: b=2 [CouchServerTests] plain")
        // The local time of the moment it was logged.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ssZ"
        let logged = try #require(formatter.date(from: String(first.output.1)))
        #expect(logged >= before.addingTimeInterval(-1) && logged <= after)
    }

    @Test func linesFromManyThreadsStayWhole() throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let (logger, descriptor) = try logger(label: "busy", into: path)
        defer { close(descriptor) }
        let threads = 8, perThread = 400
        // Some lines are longer than a pipe's atomic write (4 KiB) and the stream's buffers.
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                let filler = String(repeating: Character(UnicodeScalar(UInt8(97 + thread))), count: index % 50 == 0 ? 20_000 : index % 90)
                logger.error("\(thread)/\(index) \(filler) end")
            }
        }
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == threads * perThread)
        var seen = Set<String>()
        for line in lines {
            let message = try #require(line.firstMatch(of: /\[CouchServerTests\] (\d+)\/(\d+) ([a-h]*) end$/))
            let thread = Int(message.output.1)!, index = Int(message.output.2)!
            let expected = index % 50 == 0 ? 20_000 : index % 90
            #expect(message.output.3.count == expected && message.output.3.allSatisfy { $0 == Character(UnicodeScalar(UInt8(97 + thread))) })
            seen.insert("\(thread)/\(index)")
        }
        #expect(seen.count == threads * perThread)
    }
}
