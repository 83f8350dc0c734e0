import Dispatch
import Foundation

/// Runs `stop` and exits on SIGINT or SIGTERM.
enum ShutdownSignals {
    static func install(stop: @escaping @Sendable (String) -> Void) {
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            // The default action (ending the process at once) is turned off first; the
            // source then installs Dispatch's own handler, which hands the signal to it.
            // Turning it off after would race with that installation (done on Dispatch's
            // manager thread) and could replace Dispatch's handler, losing every signal.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                stop(name)
                exit(0)
            }
            source.resume()
            sources.append(source)
        }
    }

    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
}
