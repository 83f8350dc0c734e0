import Foundation

/// A fixed number of threads taking work from one queue. Unlike Dispatch's shared pools,
/// whose width follows the number of cores and grows only after a delay when work blocks,
/// these threads are always there: blocking store work and the replicator's tasks never
/// wait behind unrelated work of the process.
final class ThreadPool: @unchecked Sendable {
    private let condition = NSCondition()
    private var work: [@Sendable () -> Void] = []
    private var head = 0

    init(name: String, threads: Int) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [self] in run() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    func submit(_ item: @escaping @Sendable () -> Void) {
        condition.lock()
        work.append(item)
        condition.signal()
        condition.unlock()
    }

    private func run() {
        // Process signals (SIGINT, SIGTERM) go to the threads that wait for them: a pool
        // thread started before the server's signal handling must not take and lose them.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        while true {
            condition.lock()
            while head == work.count { condition.wait() }
            let item = work[head]
            head += 1
            if head > 256 && head * 2 > work.count {
                work.removeFirst(head)
                head = 0
            }
            condition.unlock()
            item()
        }
    }
}
