import Synchronization

/// A fixed row of counters that threads add to without taking a lock.
///
/// Why: every request counts itself, and on two cores with many listener threads a lock
/// around the counts was often held by a thread the kernel had just preempted, so others
/// slept on it (a futex wait and a context switch) for a figure nobody was reading.
final class AtomicCounters: @unchecked Sendable {
    let count: Int
    private let slots: UnsafeMutablePointer<Atomic<Int>>

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        for index in 0..<count { (slots + index).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    /// Adds `amount` to counter `index`; returns the counter's previous value.
    @discardableResult
    func add(_ amount: Int = 1, at index: Int) -> Int {
        slots[index].wrappingAdd(amount, ordering: .relaxed).oldValue
    }

    func store(_ value: Int, at index: Int) {
        slots[index].store(value, ordering: .relaxed)
    }

    subscript(index: Int) -> Int {
        slots[index].load(ordering: .relaxed)
    }
}
