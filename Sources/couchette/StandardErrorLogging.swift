import Logging

/// Every command logs to standard error at the level its `--log-level` names.
enum StandardErrorLogging {
    static func bootstrap(level: Logger.Level) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}
