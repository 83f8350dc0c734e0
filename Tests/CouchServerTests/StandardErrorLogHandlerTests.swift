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

    /// Into a file, and into a pipe (a service manager's log), where the kernel keeps only
    /// writes of up to `PIPE_BUF` bytes whole.
    @Test(arguments: ["file", "pipe"])
    func linesFromManyThreadsStayWhole(into kind: String) throws {
        let path = temporaryPath()
        defer { unlink(path) }
        let descriptor: Int32
        var reader: Thread?
        let drained = DispatchSemaphore(value: 0)
        if kind == "file" {
            descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        } else {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            descriptor = ends[1]
            let readEnd = ends[0]
            // The reader copies the pipe into the file, slowly enough that the pipe fills.
            reader = Thread {
                let output = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = read(readEnd, &buffer, buffer.count)
                    if count <= 0 { break }
                    _ = buffer.withUnsafeBytes { Glibc.write(output, $0.baseAddress!, count) }
                    usleep(10)
                }
                close(output)
                close(readEnd)
                drained.signal()
            }
            reader?.start()
        }
        try #require(descriptor >= 0)
        let logger = Logger(label: "busy") { StandardErrorLogHandler(label: $0, descriptor: descriptor) }
        let threads = 8, perThread = 400
        // Every 50th line is longer than a pipe keeps whole (4 KiB).
        let finished = DispatchGroup()
        for thread in 0..<threads {
            finished.enter()
            Thread {
                for index in 0..<perThread {
                    let filler = String(repeating: Character(UnicodeScalar(UInt8(97 + thread))),
                                        count: index % 50 == 0 ? 20_000 : index % 90)
                    logger.error("\(thread)/\(index) \(filler) end")
                }
                finished.leave()
            }.start()
        }
        finished.wait()
        close(descriptor)
        if reader != nil { drained.wait() }
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == threads * perThread)
        var seen = Set<String>()
        var garbled: [Substring] = []
        for line in lines {
            guard let message = line.firstMatch(of: /\[CouchServerTests\] (\d+)\/(\d+) ([a-h]*) end$/),
                  let thread = Int(message.output.1), let index = Int(message.output.2),
                  message.output.3.count == (index % 50 == 0 ? 20_000 : index % 90),
                  message.output.3.allSatisfy({ $0 == Character(UnicodeScalar(UInt8(97 + thread))) }) else {
                garbled.append(line.prefix(120))
                continue
            }
            seen.insert("\(thread)/\(index)")
        }
        #expect(garbled.isEmpty, "\(garbled.count) lines mixed with others, the first: \(garbled.first ?? "")")
        #expect(seen.count == threads * perThread)
    }
}
