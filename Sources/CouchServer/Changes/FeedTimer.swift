import Dispatch

/// A timer for change feeds. All feeds share one serial queue, so a thousand idle feeds
/// cost a thousand small timers, not a thousand threads.
final class FeedTimer: @unchecked Sendable {
    private static let queue = DispatchQueue(label: "couchette.feed-timers")
    private let source: DispatchSourceTimer

    /// Fires `handler` every `milliseconds`.
    init(every milliseconds: Int, handler: @escaping @Sendable () -> Void) {
        source = DispatchSource.makeTimerSource(queue: Self.queue)
        let interval = DispatchTimeInterval.milliseconds(milliseconds)
        source.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(max(1, milliseconds / 20)))
        source.setEventHandler(handler: handler)
        source.resume()
    }

    func cancel() { source.cancel() }

    deinit { source.cancel() }
}
