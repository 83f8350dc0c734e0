import CouchCore
import Foundation

/// JavaScript contexts for concurrent callers: each is its own virtual machine, so two
/// requests never wait on one context's lock. Created on demand up to `capacity`; a
/// context the watchdog stopped is discarded and replaced (its heap may be huge).
final class ContextPool: @unchecked Sendable {
    let limits: FunctionLimits
    let capacity: Int
    private let condition = NSCondition()
    private var idle: [ScriptContext] = []
    private var live = 0

    init(limits: FunctionLimits, capacity: Int) {
        self.limits = limits
        self.capacity = max(1, capacity)
    }

    func withContext<T>(_ body: (ScriptContext) throws -> T) throws -> T {
        let context = try checkOut()
        defer { checkIn(context) }
        context.beginUse()
        return try body(context)
    }

    private func checkOut() throws(CouchError) -> ScriptContext {
        condition.lock()
        while idle.isEmpty && live >= capacity { condition.wait() }
        if let context = idle.popLast() {
            condition.unlock()
            return context
        }
        live += 1
        condition.unlock()
        do {
            return try ScriptContext(limits: limits)
        } catch {
            condition.lock()
            live -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func checkIn(_ context: ScriptContext) {
        condition.lock()
        if context.stoppedBy == nil {
            idle.append(context)
        } else {
            live -= 1
        }
        condition.signal()
        condition.unlock()
    }
}
