import CouchServer
import Logging

/// Every command logs to standard error at the level its `--log-level` names; `serve`
/// changes it live when `[log] level` is set through `/_node/_local/_config`.
enum StandardErrorLogging {
    static func bootstrap(level: Logger.Level) {
        LogLevelControl.level = level
        LoggingSystem.bootstrap(LogLevelControl.standardErrorHandler)
    }
}
