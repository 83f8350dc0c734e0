import CouchCore
import Logging

/// What flows from the changes reader to the workers.
enum QueuedChange: Sendable {
    case change(Change)
    /// The feed reached this sequence with nothing more to copy (filtered rows, or the end).
    case lastSequence(SourceSequence)

    var sequence: SourceSequence {
        switch self {
        case .change(let change): change.sequence
        case .lastSequence(let sequence): sequence
        }
    }
}

/// The first stage: reads the source's change feed from the start sequence into the work
/// queue. A one-shot feed ends the queue when it ends; a continuous one reconnects from
/// the last sequence read whenever the connection ends. A feed that breaks mid-way is
/// reopened where it broke, a few times, before the session gives up.
struct ChangesReader: Sendable {
    let source: DatabaseEndpoint
    let template: ChangesRequest
    let retries: Int
    let logger: Logger

    func run(from start: SourceSequence, into queue: BoundedQueue<QueuedChange>,
             caughtUp: @escaping @Sendable () -> Void, changesArrived: @escaping @Sendable () -> Void) async throws(ReplicationError) {
        var since = start
        var backoff = Backoff.request
        while true {
            var request = template
            request.since = since
            var delivered = false
            do {
                let stream = try await source.changes(request)
                defer { stream.cancel() }
                while let event = try await stream.next() {
                    switch event {
                    case .change(let change):
                        delivered = true
                        changesArrived()
                        guard await queue.put(.change(change)) else { return }
                        since = change.sequence
                        backoff.reset()
                    case .lastSequence(let sequence):
                        // Only a continuous replication checkpoints at a feed's `last_seq`
                        // (CouchDB's changes reader): a one-shot one records the last change it
                        // copied, and one that met no change records nothing (`no_changes`).
                        if template.continuous {
                            guard await queue.put(.lastSequence(sequence)) else { return }
                        }
                        since = sequence
                    case .caughtUp:
                        // The feed works: a cut later (a proxy closing a quiet connection)
                        // is a new failure, not one more of a series.
                        backoff.reset()
                        caughtUp()
                    }
                }
            } catch where error.isTransient && backoff.failures < retries {
                let wait = backoff.next()
                logger.notice("change feed from \(source.displayName) failed (\(error.reason)); reopening at \(since) in \(wait) ms")
                try await Self.sleep(milliseconds: wait)
                continue
            }
            if Task.isCancelled { throw ReplicationError(.stopped, "stopped") }
            guard template.continuous else {
                queue.finish()
                return
            }
            // A continuous feed ended (the peer closed it): open it again, without spinning
            // against a peer that closes it at once.
            if !delivered { try await Self.sleep(milliseconds: 100) }
        }
    }

    static func sleep(milliseconds: Int) async throws(ReplicationError) {
        do {
            // Saturating: a wait long enough to overflow nanoseconds is a wait forever.
            let (nanoseconds, overflow) = UInt64(max(0, milliseconds)).multipliedReportingOverflow(by: 1_000_000)
            try await Task.sleep(nanoseconds: overflow ? UInt64.max : nanoseconds)
        } catch {
            throw ReplicationError(.stopped, "stopped")
        }
    }
}
