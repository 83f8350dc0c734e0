import Dispatch
import Foundation

/// Runs `stop` and exits on SIGINT or SIGTERM.
///
/// A plain signal handler writes the signal's number into a pipe that a thread of our own
/// reads. (A dispatch signal source is not reliable here: on Linux it reads a signalfd, which
/// only sees a signal that every thread blocks, and threads started before the source —
/// libmicrohttpd's, Foundation's — do not; a SIGTERM delivered to one of them was lost and
/// the server never stopped.)
enum ShutdownSignals {
    nonisolated(unsafe) private static var pipeDescriptors: [Int32] = [-1, -1]

    static func install(stop: @escaping @Sendable (String) -> Void) {
        guard pipe(&pipeDescriptors) == 0 else { return }
        let thread = Thread {
            var number: Int32 = 0
            while read(pipeDescriptors[0], &number, MemoryLayout<Int32>.size) != MemoryLayout<Int32>.size {}
            stop(number == SIGINT ? "SIGINT" : "SIGTERM")
            exit(0)
        }
        thread.start()
        for number in [SIGINT, SIGTERM] {
            signal(number) { received in
                // Only async-signal-safe calls here: one write(2).
                var value = received
                _ = write(ShutdownSignals.pipeDescriptors[1], &value, MemoryLayout<Int32>.size)
            }
        }
    }
}
