import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Set once the client that asked for a piece of work has gone. Work that can run long (a
/// design function, a scan of an index, a large `_bulk_get`) checks it and stops, so a client
/// that hangs up takes its load with it. The thread answering a request reaches its
/// cancellation through `current`, so code deep in the store, the indexes or the function
/// runtime needs no extra parameter.
public final class RequestCancellation: Sendable {
    private let cancelled = Atomic<Bool>(false)

    public init() {}

    public var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    public func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Throws CouchDB's answer to a request whose client is gone (it is never sent: nobody
    /// reads it) when the work should stop.
    public func check() throws(CouchError) {
        if isCancelled { throw CouchError.clientGone }
    }

    /// The cancellation of the request the calling thread is answering; nil outside one.
    public static var current: RequestCancellation? {
        guard let raw = pthread_getspecific(key) else { return nil }
        return Unmanaged<RequestCancellation>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Runs `body` with `cancellation` as the thread's current one.
    public static func withCurrent<T, E: Error>(_ cancellation: RequestCancellation?, _ body: () throws(E) -> T) throws(E) -> T {
        let previous = pthread_getspecific(key)
        let retained = cancellation.map { Unmanaged.passRetained($0).toOpaque() }
        pthread_setspecific(key, retained)
        defer {
            pthread_setspecific(key, previous)
            if let retained { Unmanaged<RequestCancellation>.fromOpaque(retained).release() }
        }
        return try body()
    }

    /// Throws when the calling thread's request was cancelled.
    public static func checkCurrent() throws(CouchError) {
        try current?.check()
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()
}
