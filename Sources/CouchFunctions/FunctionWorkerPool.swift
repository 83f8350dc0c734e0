import CouchCore
import Foundation

/// The worker processes of a runtime. A worker belongs to one database (its owner) for its
/// whole life, so no database's functions ever run in an engine another database's functions
/// touched. At most `capacity` processes live at once; one database may keep at most `share`
/// of them busy, so a database full of slow functions leaves workers for the others. When
/// every place is taken, an idle worker of another database is ended to make room.
final class FunctionWorkerPool: @unchecked Sendable {
    let limits: FunctionLimits
    let capacity: Int
    let share: Int
    private let executable: String?
    private let condition = NSCondition()
    /// Least recently used first.
    private var idle: [FunctionWorker] = []
    private var busy: [String: Int] = [:]
    private var live = 0
    /// A worker unused this long is ended, giving its memory back.
    private static let idleSeconds: UInt64 = 300

    init(limits: FunctionLimits, capacity: Int, executable: String?) {
        self.limits = limits
        self.capacity = max(2, capacity)
        share = max(1, self.capacity / 2)
        self.executable = executable
    }

    deinit {
        idle.forEach { $0.kill() }
    }

    /// Runs `body` with a worker of `owner`, waiting for one if its share is in use; a client
    /// that hangs up while it waits stops the wait.
    func withWorker<T>(owner: String, _ body: (FunctionWorker) throws(CouchError) -> T) throws(CouchError) -> T {
        let worker = try checkOut(owner)
        defer { checkIn(worker) }
        return try body(worker)
    }

    /// Ends the idle workers of `owner`: its database was deleted or created anew.
    func retire(owner: String) {
        condition.lock()
        let retired = idle.filter { $0.owner == owner }
        idle.removeAll { $0.owner == owner }
        live -= retired.count
        condition.broadcast()
        condition.unlock()
        retired.forEach { $0.kill() }
    }

    private func checkOut(_ owner: String) throws(CouchError) -> FunctionWorker {
        let cancellation = RequestCancellation.current
        condition.lock()
        while true {
            if busy[owner, default: 0] < share {
                if let index = idle.lastIndex(where: { $0.owner == owner }) {
                    let worker = idle.remove(at: index)
                    busy[owner, default: 0] += 1
                    condition.unlock()
                    return worker
                }
                if live < capacity {
                    live += 1
                    busy[owner, default: 0] += 1
                    condition.unlock()
                    return try start(owner)
                }
                if !idle.isEmpty {
                    // Its place goes to the new worker: `live` stays as it is.
                    let evicted = idle.removeFirst()
                    busy[owner, default: 0] += 1
                    condition.unlock()
                    evicted.kill()
                    return try start(owner)
                }
            }
            if cancellation?.isCancelled == true {
                condition.unlock()
                throw CouchError.clientGone
            }
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
        }
    }

    private func start(_ owner: String) throws(CouchError) -> FunctionWorker {
        do throws(CouchError) {
            guard let executable else {
                throw CouchError(.osProcessError, "no JavaScript worker (\(FunctionWorkerProtocol.executableName)) was found")
            }
            return try FunctionWorker(executable: executable, owner: owner)
        } catch {
            condition.lock()
            live -= 1
            busy[owner, default: 1] -= 1
            condition.broadcast()
            condition.unlock()
            throw error
        }
    }

    private func checkIn(_ worker: FunctionWorker) {
        let retire = worker.isSpent || worker.isBloated(limits)
        if retire { worker.kill() }
        let now = DispatchTime.now().uptimeNanoseconds
        condition.lock()
        busy[worker.owner, default: 1] -= 1
        if busy[worker.owner] == 0 { busy[worker.owner] = nil }
        if retire { live -= 1 } else { idle.append(worker) }
        let stale = idle.filter { now &- $0.lastUse.uptimeNanoseconds > Self.idleSeconds * 1_000_000_000 }
        idle.removeAll { now &- $0.lastUse.uptimeNanoseconds > Self.idleSeconds * 1_000_000_000 }
        live -= stale.count
        condition.broadcast()
        condition.unlock()
        stale.forEach { $0.kill() }
    }
}
