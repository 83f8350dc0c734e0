import CouchCore
import Glibc
import Logging

/// Writes each message as one line, in swift-log's `StreamLogHandler` format
/// (`2026-11-28T00:35:27+0000 info couchette.http: key=value [CouchServer] GET /db 200 0.12ms`),
/// with one `write` of the whole line, at the level `LogLevelControl.level` names.
///
/// Why not `StreamLogHandler` itself: at the default level every request logs a line, and it
/// spent 9–13 µs of a 35–40 µs `GET` on it: `localtime` (which reads `/etc/localtime` again at
/// every call), its text built by interpolation, the standard-error stream's lock and flush.
/// Here the time is formatted once a second and the line goes out as bytes in one `write`,
/// which keeps it whole without lines waiting for each other: the kernel orders writes to one
/// open file, and to a pipe (a service manager's log) those of up to `PIPE_BUF` bytes. A longer
/// line (a long URL) may be split on a pipe, so it is written alone (`LineOrder`).
public struct StandardErrorLogHandler: LogHandler {
    private let label: String
    private let descriptor: Int32
    public var metadata: Logger.Metadata = [:]

    /// `descriptor`: where lines go (standard error unless a test gives its own).
    public init(label: String, descriptor: Int32 = STDERR_FILENO) {
        self.label = label
        self.descriptor = descriptor
    }

    public var logLevel: Logger.Level {
        get { LogLevelControl.level }
        set { LogLevelControl.level = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(128)
        line.append(contentsOf: LogTimestamp.current())
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: event.level.rawValue.utf8)
        if !label.isEmpty {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: label.utf8)
        }
        line.append(UInt8(ascii: ":"))
        var merged = metadata
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: "\(key)=\(value)".utf8)
        }
        line.append(contentsOf: " [".utf8)
        line.append(contentsOf: event.source.utf8)
        line.append(contentsOf: "] ".utf8)
        line.append(contentsOf: event.message.description.utf8)
        line.append(UInt8(ascii: "\n"))
        write(line)
    }

    private func write(_ line: [UInt8]) {
        if line.count > Int(PIPE_BUF) {
            LineOrder.alone { writeAll(line) }
        } else {
            LineOrder.together { writeAll(line) }
        }
    }

    private func writeAll(_ line: [UInt8]) {
        line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return  // a closed or full standard error: the message is lost, not the server
                }
            }
        }
    }
}

/// Short lines are written together (each `write` is whole), a long one alone, under a
/// writer-preferring lock: a steady stream of short lines cannot hold a long one back.
enum LineOrder {
    private static let lock = ReadWriteLock()

    static func together(_ body: () -> Void) { lock.reading(body) }

    static func alone(_ body: () -> Void) { lock.writing(body) }
}

/// The local time as `%Y-%m-%dT%H:%M:%S%z`, formatted once a second.
enum LogTimestamp {
    private static let text = TextEachSecond(format: format)

    static func current() -> [UInt8] { text.now() }

    static func format(_ seconds: time_t) -> [UInt8] {
        var seconds = seconds
        var local = tm()
        // `localtime_r`, unlike `localtime`, does not read the zone's file again at each call.
        guard localtime_r(&seconds, &local) != nil else { return Array("<unknown>".utf8) }
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &local)
        return buffer.prefix(count).map { UInt8(bitPattern: $0) }
    }
}
