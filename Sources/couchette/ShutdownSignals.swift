import Foundation

/// The pipe a signal handler writes the signal's number to (set before any handler runs).
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// Runs a handler on its own thread for each SIGINT or SIGTERM. A real handler (writing to
/// a pipe, the one thing it may safely do) rather than an ignored signal read by Dispatch:
/// JavaScriptCore starts threads that do not block signals, and an ignored signal delivered
/// to one of them would be lost.
enum ShutdownSignals {
    static func onSignal(_ handler: @escaping @Sendable (String) -> Void) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }
        signalPipeWriteEnd = ends[1]
        let readEnd = ends[0]
        Thread {
            var byte: UInt8 = 0
            while true {
                let count = read(readEnd, &byte, 1)
                if count == 1 { handler(Int32(byte) == SIGINT ? "SIGINT" : "SIGTERM") }
                if count == 0 { return }
            }
        }.start()
        for number in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { number in
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(number, &action, nil)
            // Unblock it here too, in case the process was started with it blocked.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, number)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
        }
    }

    /// Runs `stop` and exits on the first SIGINT or SIGTERM (a second one exits at once).
    static func install(stop: @escaping @Sendable (String) -> Void) {
        let first = NSLock()
        nonisolated(unsafe) var stopping = false
        onSignal { name in
            if first.withLock({ let was = stopping; stopping = true; return was }) { exit(0) }
            Thread { stop(name); exit(0) }.start()
        }
    }
}
