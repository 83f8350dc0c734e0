import CouchServer
import Foundation
import Logging

/// Open files bound how many connections the server can hold: each takes a descriptor, and
/// databases, blobs and logs need theirs. The soft limit is raised to the hard one (as
/// `scripts/serve` and `scripts/test` do with `ulimit -n`), and the connection limit is
/// lowered below it, so that libmicrohttpd refuses connections before the process runs
/// out of descriptors; the effective limits are logged at start.
enum DescriptorLimit {
    /// Descriptors kept for databases, attachments, replication and the listener itself.
    static let reserved = 256

    static func apply(to listener: inout ListenerConfiguration, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, 1 << 20)
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let files = Int(clamping: limit.rlim_cur)
        let connections = max(16, files - reserved)
        if listener.connectionLimit > connections {
            logger.warning("""
                open files limited to \(files): accepting at most \(connections) connections instead of \
                \(listener.connectionLimit) (raise it with ulimit -n)
                """)
            listener.connectionLimit = connections
        }
        logger.info("limits: \(files) open files, \(listener.connectionLimit) connections, \(listener.threadCount) threads")
    }
}
