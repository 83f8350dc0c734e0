import CouchCore
import Glibc

/// The current time as text, formatted at most once a second however often it is asked for
/// (every response's `Date`, every log line's time).
final class TextEachSecond<Text: Sendable>: Sendable {
    private let format: @Sendable (time_t) -> Text
    private let cached = Locked<(second: time_t, text: Text?)>((-1, nil))

    init(format: @escaping @Sendable (time_t) -> Text) {
        self.format = format
    }

    func now() -> Text {
        let second = time(nil)
        if let text = cached.withLock({ $0.second == second ? $0.text : nil }) { return text }
        let text = format(second)
        cached.withLock { $0 = (second, text) }
        return text
    }
}
