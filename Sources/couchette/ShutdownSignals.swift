import Foundation

/// SIGINT and SIGTERM stop the server cleanly. `install` runs first thing, before any other
/// thread exists: the signals are blocked in the main thread, so in every thread started
/// after it, and taken by one thread waiting in `sigwait`. (A dispatch signal source with the
/// signal set to SIG_IGN lost it now and then on Linux, when the kernel delivered it to a
/// thread that did not block it, and the server ignored SIGTERM.)
final class ShutdownSignals: @unchecked Sendable {
    private let lock = NSLock()
    private var stop: (@Sendable (String) -> Void)?

    static func install() -> ShutdownSignals {
        let handler = ShutdownSignals()
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let waiting = signals
        let thread = Thread {
            var set = waiting
            var received: Int32 = 0
            while sigwait(&set, &received) != 0 {}
            let stop = handler.lock.withLock { handler.stop }
            stop?(received == SIGINT ? "SIGINT" : "SIGTERM")
            exit(0)
        }
        thread.name = "signals"
        thread.start()
        return handler
    }

    /// What to do before exiting; until it is set, a signal exits at once.
    func onSignal(_ stop: @escaping @Sendable (String) -> Void) {
        lock.withLock { self.stop = stop }
    }
}
