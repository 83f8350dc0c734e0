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

/// How many items ran at once, at most.
private final class Concurrency: @unchecked Sendable {
    private let lock = NSLock()
    private var running = 0
    private var highest = 0

    func enter() { lock.withLock { running += 1; highest = max(highest, running) } }
    func leave() { lock.withLock { running -= 1 } }
    var most: Int { lock.withLock { highest } }
}
