/// How long one call may run and how large its worker may grow.
public struct FunctionLimits: Sendable {
    /// CouchDB's `[query_server_config] os_process_timeout` (5 s by default).
    public var timeout: Double
    /// Bytes of memory one call may add to its worker process (`[couchette] function_memory_limit`).
    public var memory: Int

    public init(timeout: Double = 5, memory: Int = 256 * 1024 * 1024) {
        self.timeout = timeout
        self.memory = memory
    }

    /// A duration as the error reasons write it: `5 s`, `0.5 s`.
    public static func seconds(_ value: Double) -> String {
        value == value.rounded() && value < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }
}
