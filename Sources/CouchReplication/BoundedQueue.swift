import Foundation

/// A first-in first-out queue between pipeline stages: producers wait while it is full
/// (so a fast change feed cannot outrun the workers by more than `capacity` changes),
/// consumers take whatever is there up to a batch size, waiting while it is empty.
/// Waiting ends when the queue is finished or the waiting task is cancelled.
final class BoundedQueue<Element: Sendable>: @unchecked Sendable {
    private let capacity: Int
    private let lock = NSLock()
    private var items: [Element] = []
    private var head = 0
    private var finished = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// Counts changes, so a waiter that looked before a change does not sleep through it.
    private var version = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return items.count - head
    }

    /// Adds an element, waiting for room; false if the queue was finished or the task cancelled.
    @discardableResult
    func put(_ element: Element) async -> Bool {
        while true {
            let (added, seen) = tryPut(element)
            if let added { return added }
            await wait(ifUnchangedSince: seen)
        }
    }

    /// nil when full, with the version seen.
    private func tryPut(_ element: Element) -> (Bool?, Int) {
        lock.lock()
        if finished || Task.isCancelled {
            lock.unlock()
            return (false, 0)
        }
        guard items.count - head < capacity else {
            let seen = version
            lock.unlock()
            return (nil, seen)
        }
        items.append(element)
        version += 1
        let woken = takeWaiters()
        lock.unlock()
        woken.forEach { $0.resume() }
        return (true, 0)
    }

    /// Takes between one and `maximum` elements, waiting while there are none; nil once the
    /// queue is finished and drained, or the task is cancelled. `register` runs under the
    /// queue's lock, so batches are registered in the order they were taken; its result
    /// comes back with the batch.
    func takeBatch<Token>(maximum: Int, register: ([Element]) -> Token) async -> (elements: [Element], token: Token)? {
        while true {
            switch tryTake(maximum: maximum, register: register) {
            case .batch(let batch, let token): return (batch, token)
            case .end: return nil
            case .empty(let seen): await wait(ifUnchangedSince: seen)
            }
        }
    }

    private enum Taken<Token> {
        case batch([Element], Token)
        case end
        case empty(version: Int)
    }

    private func tryTake<Token>(maximum: Int, register: ([Element]) -> Token) -> Taken<Token> {
        lock.lock()
        if Task.isCancelled {
            lock.unlock()
            return .end
        }
        guard head < items.count else {
            let taken: Taken<Token> = finished ? .end : .empty(version: version)
            lock.unlock()
            return taken
        }
        let end = min(items.count, head + max(1, maximum))
        let batch = Array(items[head..<end])
        head = end
        version += 1
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        let token = register(batch)
        let woken = takeWaiters()
        lock.unlock()
        woken.forEach { $0.resume() }
        return .batch(batch, token)
    }

    /// No more elements will come: consumers drain what is left, then get nil.
    func finish() {
        lock.lock()
        finished = true
        version += 1
        let woken = takeWaiters()
        lock.unlock()
        woken.forEach { $0.resume() }
    }

    private func register(_ continuation: CheckedContinuation<Void, Never>, seen: Int) {
        lock.lock()
        if Task.isCancelled || version != seen {
            lock.unlock()
            continuation.resume()
        } else {
            waiters.append(continuation)
            lock.unlock()
        }
    }

    private func wakeAll() {
        lock.lock()
        let woken = takeWaiters()
        lock.unlock()
        woken.forEach { $0.resume() }
    }

    private func takeWaiters() -> [CheckedContinuation<Void, Never>] {
        let woken = waiters
        waiters = []
        return woken
    }

    /// Waits until anything changes after `seen` (or the task is cancelled); callers re-check.
    private func wait(ifUnchangedSince seen: Int) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                register(continuation, seen: seen)
            }
        } onCancel: {
            wakeAll()
        }
    }
}
