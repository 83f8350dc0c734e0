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
            lock.lock()
            if finished || Task.isCancelled {
                lock.unlock()
                return false
            }
            if items.count - head < capacity {
                items.append(element)
                let woken = takeWaiters()
                lock.unlock()
                woken.forEach { $0.resume() }
                return true
            }
            lock.unlock()
            await wait()
        }
    }

    /// Takes between one and `maximum` elements, waiting while there are none; nil once the
    /// queue is finished and drained, or the task is cancelled. `onTake` runs under the
    /// queue's lock, so batches are registered in the order they were taken.
    func takeBatch(maximum: Int, onTake: ([Element]) -> Void = { _ in }) async -> [Element]? {
        while true {
            lock.lock()
            if Task.isCancelled {
                lock.unlock()
                return nil
            }
            if head < items.count {
                let end = min(items.count, head + max(1, maximum))
                let batch = Array(items[head..<end])
                head = end
                if head > 1024 && head * 2 > items.count {
                    items.removeFirst(head)
                    head = 0
                }
                onTake(batch)
                let woken = takeWaiters()
                lock.unlock()
                woken.forEach { $0.resume() }
                return batch
            }
            if finished {
                lock.unlock()
                return nil
            }
            lock.unlock()
            await wait()
        }
    }

    /// No more elements will come: consumers drain what is left, then get nil.
    func finish() {
        lock.lock()
        finished = true
        let woken = takeWaiters()
        lock.unlock()
        woken.forEach { $0.resume() }
    }

    private func takeWaiters() -> [CheckedContinuation<Void, Never>] {
        let woken = waiters
        waiters = []
        return woken
    }

    /// Waits until anything changes (or the task is cancelled); callers re-check.
    private func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                lock.lock()
                if Task.isCancelled {
                    lock.unlock()
                    continuation.resume()
                } else {
                    waiters.append(continuation)
                    lock.unlock()
                }
            }
        } onCancel: {
            lock.lock()
            let woken = takeWaiters()
            lock.unlock()
            woken.forEach { $0.resume() }
        }
    }
}
