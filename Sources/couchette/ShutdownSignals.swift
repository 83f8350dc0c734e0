import Dispatch
import Foundation

/// Blocks until SIGINT or SIGTERM, then runs `stop` and exits.
enum ShutdownSignals {
    static func wait(stop: @escaping @Sendable (String) -> Void) -> Never {
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                stop(name)
                exit(0)
            }
            source.resume()
            sources.append(source)
        }
        dispatchMain()
    }

    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
}
