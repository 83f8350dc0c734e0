/// Work of many owners (databases) on one `ThreadPool`, no owner holding more than `share`
/// of it at once: an owner's further work waits in its own queue, so a database flooded with
/// slow requests (functions that loop, patterns that backtrack) leaves threads to the others.
/// An owner's work runs in the order it came.
public final class FairQueue: Sendable {
    private let pool: ThreadPool
    private let share: Int
    private let state = Locked<[String: Owner]>([:])

    private struct Owner {
        var running = 0
        var waiting = ReleasingQueue<@Sendable () -> Void>()
    }

    public init(pool: ThreadPool, share: Int) {
        self.pool = pool
        self.share = max(1, share)
    }

    public func submit(owner: String, _ item: @escaping @Sendable () -> Void) {
        let runsNow = state.withLock { owners in
            var entry = owners[owner, default: Owner()]
            defer { owners[owner] = entry }
            guard entry.running < share else {
                entry.waiting.append(item)
                return false
            }
            entry.running += 1
            return true
        }
        if runsNow { dispatch(owner, item) }
    }

    private func dispatch(_ owner: String, _ item: @escaping @Sendable () -> Void) {
        pool.submit { [self] in
            item()
            // The place this item held goes to the owner's next one, if any.
            let next: (@Sendable () -> Void)? = state.withLock { owners in
                guard var entry = owners[owner] else { return nil }
                guard let item = entry.waiting.popFirst() else {
                    entry.running -= 1
                    owners[owner] = entry.running == 0 ? nil : entry
                    return nil
                }
                owners[owner] = entry
                return item
            }
            if let next { dispatch(owner, next) }
        }
    }
}
