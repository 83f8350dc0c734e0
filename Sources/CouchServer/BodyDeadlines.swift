import Foundation
import Logging

/// Closes connections whose request body arrives too slowly, however steadily it trickles.
///
/// Why: libmicrohttpd renews a connection's idle timeout with every byte, so a body sent a
/// byte at a time would hold its connection (and, for an upload, its temporary file) for
/// ever. The access handler only runs when data arrives, so it cannot notice a client that
/// has stalled; this watcher runs on its own thread. A body must arrive at an average of
/// `minimumRate` bytes per second once a grace period has passed, so its deadline scales with
/// its size: `grace + received / minimumRate` seconds after its head. A connection that falls
/// behind is shut down; libmicrohttpd then sees the end of the stream, closes it and reports
/// the request as not completed, so the handler is never called and nothing is written.
final class BodyDeadlines: @unchecked Sendable {
    private struct Body {
        let descriptor: Int32
        let started: Double
        var received: Int
        let label: String
    }

    private let grace: Double
    private let minimumRate: Double
    private let logger: Logger
    private let lock = NSLock()
    private var bodies: [ObjectIdentifier: Body] = [:]
    private var stopping = false
    private let stopped = DispatchSemaphore(value: 0)

    init(graceSeconds: Double, minimumRate: Int, logger: Logger) {
        grace = graceSeconds
        self.minimumRate = Double(max(1, minimumRate))
        self.logger = logger
        let thread = Thread { [self] in run() }
        thread.name = "couchette-bodies"
        thread.start()
    }

    /// Starts the clock for the body of `request`, whose connection is `descriptor`.
    func watch(_ request: AnyObject, descriptor: Int32, label: String) {
        guard descriptor >= 0 else { return }
        let body = Body(descriptor: descriptor, started: Self.now(), received: 0, label: label)
        lock.withLock { bodies[ObjectIdentifier(request)] = body }
    }

    func received(_ count: Int, for request: AnyObject) {
        lock.withLock { bodies[ObjectIdentifier(request)]?.received += count }
    }

    /// The body is complete, refused or its connection gone. Called before libmicrohttpd
    /// closes the descriptor (from the access handler or the completion callback), so the
    /// watcher never shuts down a descriptor that has since been reused.
    func unwatch(_ request: AnyObject) {
        _ = lock.withLock { bodies.removeValue(forKey: ObjectIdentifier(request)) }
    }

    func stop() {
        lock.withLock { stopping = true }
        stopped.wait()
    }

    private func run() {
        while !lock.withLock({ stopping }) {
            usleep(100_000)
            let now = Self.now()
            lock.withLock {
                for (key, body) in bodies where now - body.started > grace + Double(body.received) / minimumRate {
                    bodies[key] = nil
                    // Under the lock: `unwatch` (and so the descriptor's close) waits for this.
                    shutdown(body.descriptor, Int32(SHUT_RDWR))
                    logger.info("\(body.label) body too slow: \(body.received) bytes in \(String(format: "%.1f", now - body.started))s; connection closed")
                }
            }
        }
        stopped.signal()
    }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
