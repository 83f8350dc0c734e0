import Dispatch
import Foundation

/// Runs `stop` and exits on SIGINT or SIGTERM.
enum ShutdownSignals {
    static func install(stop: @escaping @Sendable (String) -> Void) {
        for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            // The source is made and resumed before the default action is turned off, so
            // no signal falls between the two.
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                stop(name)
                exit(0)
            }
            source.resume()
            signal(number, SIG_IGN)
            sources.append(source)
        }
    }

    nonisolated(unsafe) private static var sources: [DispatchSourceSignal] = []
}
