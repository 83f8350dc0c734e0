import Foundation
import Logging

/// The log level, changeable while the server runs (`PUT /_node/_local/_config/log/level`).
/// Log handlers built by `LogLevelControl.handler` read it at each message.
public enum LogLevelControl {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var current = Logger.Level.info

    public static var level: Logger.Level {
        get { lock.withLock { current } }
        set { lock.withLock { current = newValue } }
    }

    /// CouchDB's level names (`warn`, `err`, `alert`, `emergency`, `none` included) as swift-log's.
    public static func level(named name: String) -> Logger.Level? {
        switch name.lowercased() {
        case "debug": .debug
        case "trace": .trace
        case "info": .info
        case "notice": .notice
        case "warning", "warn": .warning
        case "error", "err": .error
        case "critical", "crit", "alert", "emergency", "none": .critical
        default: nil
        }
    }

    /// A standard-error handler whose level follows `level`.
    public static func standardErrorHandler(label: String) -> any LogHandler {
        StandardErrorLogHandler(label: label)
    }
}
