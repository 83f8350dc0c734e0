import Foundation

/// SIGINT and SIGTERM, taken by one waiting thread. They are blocked in every thread
/// (each inherits the mask of the thread that starts it) and collected with `sigwait`:
/// a signal the kernel handed to a thread that does not want it (libdispatch's main-thread
/// `sigsuspend`, a library's worker) would otherwise be dropped or end the process
/// without a clean stop.
enum ShutdownSignals {
    /// Call first, before any thread is started, so that every later thread blocks them too.
    static func block() {
        var set = signals()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits on the calling thread for SIGINT or SIGTERM, then runs `stop` and exits.
    static func waitThenStop(_ stop: (String) -> Void) -> Never {
        var set = signals()
        var number: Int32 = 0
        while sigwait(&set, &number) != 0 {}
        stop(number == SIGINT ? "SIGINT" : "SIGTERM")
        exit(0)
    }

    /// Calls `handler` on a thread of its own for each SIGINT or SIGTERM from now on.
    static func handle(_ handler: @escaping @Sendable (String) -> Void) {
        let thread = Thread {
            var set = signals()
            var number: Int32 = 0
            while true {
                guard sigwait(&set, &number) == 0 else { continue }
                handler(number == SIGINT ? "SIGINT" : "SIGTERM")
            }
        }
        thread.name = "signals"
        thread.start()
    }

    private static func signals() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }
}
