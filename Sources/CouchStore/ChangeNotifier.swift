import Foundation

/// Tells observers (change feeds, replications) that a database committed new
/// changes or went away. Observers are called on the committing thread and must be quick.
public final class ChangeNotifier: @unchecked Sendable {
    public enum Event: Sendable {
        case committed(sequence: Int)
        case databaseDeleted
    }
    public typealias Observer = @Sendable (Event) -> Void

    private let lock = NSLock()
    private var observers: [Int: Observer] = [:]
    private var nextToken = 0

    public init() {}

    /// Registers an observer; keep the token to remove it.
    public func observe(_ observer: @escaping Observer) -> Int {
        lock.lock()
        defer { lock.unlock() }
        nextToken += 1
        observers[nextToken] = observer
        return nextToken
    }

    public func remove(_ token: Int) {
        lock.lock()
        observers[token] = nil
        lock.unlock()
    }

    public var observerCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return observers.count
    }

    func post(_ event: Event) {
        lock.lock()
        let current = Array(observers.values)
        lock.unlock()
        current.forEach { $0(event) }
    }
}
