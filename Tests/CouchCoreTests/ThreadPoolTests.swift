import CouchCore
import Foundation
import Testing

/// The pool runs as many items at once as it has threads (started as work needs them), and
/// no more.
@Suite struct ThreadPoolTests {
    /// Items that each wait until all of them are running: they finish only if the pool ran
    /// them side by side.
    private func runTogether(_ pool: ThreadPool, count: Int) -> Bool {
        let arrived = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<count {
            pool.submit {
                arrived.signal()
                release.wait()
                finished.signal()
            }
        }
        for _ in 0..<count where arrived.wait(timeout: .now() + 30) == .timedOut { return false }
        for _ in 0..<count { release.signal() }
        for _ in 0..<count where finished.wait(timeout: .now() + 30) == .timedOut { return false }
        return true
    }

    @Test func runsAsManyItemsAtOnceAsItHasThreads() {
        let pool = ThreadPool(name: "test-pool", threads: 6)
        #expect(runTogether(pool, count: 6))
        // Again, with the threads already there.
        #expect(runTogether(pool, count: 6))
    }

    /// Servers started one after another in a process share one pool of a name, as large as
    /// the largest asked for, instead of each leaving its threads behind.
    @Test func aSharedPoolIsOnePerNameAndGrowsToTheLargestAsked() {
        let small = ThreadPool.shared(name: "test-shared", threads: 1)
        let large = ThreadPool.shared(name: "test-shared", threads: 4)
        #expect(small === large)
        #expect(small !== ThreadPool.shared(name: "test-other", threads: 4))
        #expect(runTogether(small, count: 4))
    }

    @Test func itemsBeyondItsThreadsWaitTheirTurn() {
        let pool = ThreadPool(name: "test-pool", threads: 2)
        let concurrency = Concurrency()
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<20 {
            pool.submit {
                concurrency.enter()
                usleep(2000)
                concurrency.leave()
                done.signal()
            }
        }
        for _ in 0..<20 { #expect(done.wait(timeout: .now() + 30) == .success) }
        #expect(concurrency.most <= 2)
    }
}

/// Work done keeps nothing it captured alive: an off-thread answer's closure holds its body
/// (a `_bulk_get` of 1,000 documents, 1 MB), and the pool kept up to 256 of them after they ran.
@Suite struct QueuedWorkReleaseTests {
    @Test func anItemThePoolRanKeepsNothingItCaptured() {
        let pool = ThreadPool(name: "test-release", threads: 1)
        let released = Flag()
        let done = DispatchSemaphore(value: 0)
        do {
            let payload = Tracked(released)
            pool.submit {
                _ = payload
                done.signal()
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        // The one thread took this item only after the first was over.
        let after = DispatchSemaphore(value: 0)
        pool.submit { after.signal() }
        #expect(after.wait(timeout: .now() + 30) == .success)
        #expect(released.isSet, "the pool still holds an item it ran")
    }

    @Test func anItemAFairQueueRanKeepsNothingItCapturedWhileOthersWait() {
        let queue = FairQueue(pool: ThreadPool(name: "test-fair", threads: 2), share: 1)
        let released = Flag()
        let start = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let seen = Flag()
        queue.submit(owner: "db") { start.wait() }
        do {
            let payload = Tracked(released)
            queue.submit(owner: "db") { _ = payload }
        }
        queue.submit(owner: "db") {
            // The item before ran (its thread may still be returning from it); another still
            // waits behind this one, so a queue that kept taken items keeps the payload.
            let deadline = DispatchTime.now() + 10
            while !released.isSet && DispatchTime.now() < deadline { usleep(1000) }
            if released.isSet { seen.set() }
            checked.signal()
        }
        queue.submit(owner: "db") {}
        start.signal()
        #expect(checked.wait(timeout: .now() + 30) == .success)
        #expect(seen.isSet, "the queue still held an item it ran while others waited")
    }
}

private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

/// Sets its flag when it goes away.
private final class Tracked: @unchecked Sendable {
    private let flag: Flag
    init(_ flag: Flag) { self.flag = flag }
    deinit { flag.set() }
}

/// How many items ran at once, at most.
private final class Concurrency: @unchecked Sendable {
    private let lock = NSLock()
    private var running = 0
    private var highest = 0

    func enter() { lock.withLock { running += 1; highest = max(highest, running) } }
    func leave() { lock.withLock { running -= 1 } }
    var most: Int { lock.withLock { highest } }
}
