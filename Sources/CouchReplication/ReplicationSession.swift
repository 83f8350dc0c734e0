import CouchCore
import Foundation
import Logging

/// One run of a replication, from opening the peers to the end of the feed (one-shot),
/// a failure, or a stop; a job runs a new session after each transient failure. Each
/// session has its own `session_id` in the checkpoint history, as in CouchDB.
///
/// The pipeline: the `ChangesReader` fills a bounded queue; `workerCount` workers each
/// take a batch, find what the target lacks, fetch it in chunks and write each chunk
/// while fetching the next — so fetching and writing overlap within a worker and across
/// workers, over several kept-alive connections. A timer writes checkpoints every
/// `checkpoint_interval`; the end of a one-shot feed, and a stop, write a last one.
final class ReplicationSession: @unchecked Sendable {
    enum Outcome: Sendable {
        case completed(JSONObject)
        case failed(ReplicationError)
        case stopped
    }

    enum Report: Sendable {
        case opened
        case caughtUp
        case changesArrived
        case progressed
    }

    let sessionID = Digest.randomHex(bytes: 16)
    private let replicationID: ReplicationID
    private let settings: ReplicationSettings
    private let source: DatabaseEndpoint
    private let target: DatabaseEndpoint
    private let progress: ReplicationProgress
    private let logger: Logger
    private let report: @Sendable (Report) -> Void

    private let lock = NSLock()
    private var stopRequested = false
    private var pipeline: Task<Void, Error>?
    private var opening: Task<SourceSequence, Error>?
    private var readerCaughtUp = false
    private var reportedIdle = false

    /// Revisions are fetched and written in chunks of about `chunkBytes` of JSON, sized from
    /// the documents fetched last: between 1 and `maximumChunk` revisions, `firstChunk`
    /// before any is seen. Each chunk is one commit on the target: chunks of 100 documents
    /// of 1 KB made five times the commits of CouchDB's replicator (which flushes its
    /// `_bulk_docs` at 500 documents or 512 KiB), and large documents are fetched a few at
    /// a time, so that four workers hold a few megabytes, not hundreds.
    static let chunkBytes = 1 << 20
    static let maximumChunk = 500
    static let firstChunk = 100
    /// Bytes of a revision fetched last (0 until one is known); read and written under `lock`.
    private var revisionSize = 0

    init(replicationID: ReplicationID, settings: ReplicationSettings, source: DatabaseEndpoint, target: DatabaseEndpoint,
         progress: ReplicationProgress, logger: Logger, report: @escaping @Sendable (Report) -> Void) {
        self.replicationID = replicationID
        self.settings = settings
        self.source = source
        self.target = target
        self.progress = progress
        self.logger = logger
        self.report = report
    }

    /// Stops the session: the pipeline is cancelled and a last checkpoint written.
    func stop() {
        lock.lock()
        stopRequested = true
        let pipeline = self.pipeline
        let opening = self.opening
        lock.unlock()
        pipeline?.cancel()
        if pipeline == nil { opening?.cancel() }
    }

    private var isStopping: Bool {
        lock.withLock { stopRequested }
    }

    func run() async -> Outcome {
        let checkpointer = Checkpointer(source: source, target: target, replicationID: replicationID, sessionID: sessionID,
                                        enabled: settings.useCheckpoints, hasDocumentIDs: {
                                            if case .documentIDs? = settings.filter { return true } else { return false }
                                        }(), logger: logger)
        // Opening runs in its own task so that a stop can abandon it (nothing to checkpoint yet).
        let start: SourceSequence
        do {
            start = try await opened(checkpointer)
        } catch {
            return isStopping ? .stopped : .failed(error)
        }
        progress.startSession(at: start)
        progress.raise(to: checkpointer.historyStatistics)
        logger.info("Starting replication \(replicationID.jobID) (\(source.displayName) -> \(target.displayName)) session_id:\(sessionID) since:\(start)")

        let task = ReplicationTasks.throwingTask { try await self.runPipeline(from: start, checkpointer: checkpointer) }
        let stopped = lock.withLock {
            pipeline = task
            return stopRequested
        }
        if stopped { task.cancel() }

        let result = await task.result
        if isStopping {
            // Stopped (cancelled, or the server is shutting down): record what was written.
            do {
                try await lastCheckpoint(checkpointer)
            } catch {
                logger.error("last checkpoint of \(replicationID.jobID) failed: \(error)")
            }
            return .stopped
        }
        if case .failure(let error) = result {
            return .failed(error as? ReplicationError ?? ReplicationError(.unknown, String(describing: error)))
        }
        do {
            try await lastCheckpoint(checkpointer)
        } catch {
            return .failed(error)
        }
        progress.setPending(0)
        return .completed(checkpointer.result)
    }

    private func opened(_ checkpointer: Checkpointer) async throws(ReplicationError) -> SourceSequence {
        let work = ReplicationTasks.throwingTask { [self] () throws -> SourceSequence in
            let sourceInfo = try await source.open(create: false, createParameters: JSONObject())
            let targetInfo = try await target.open(create: settings.createTarget,
                                                   createParameters: settings.createTargetParameters)
            report(.opened)
            let start = try await checkpointer.start(sourceInfo: sourceInfo, targetInfo: targetInfo,
                                                     sinceSequence: settings.sinceSequence)
            progress.setPending(try? await source.pendingChanges(since: start))
            return start
        }
        let stopped = lock.withLock {
            opening = work
            return stopRequested
        }
        if stopped { work.cancel() }
        switch await work.result {
        case .success(let start): return start
        case .failure(let error as ReplicationError): throw error
        case .failure: throw ReplicationError(.stopped, "stopped")
        }
    }

    private func lastCheckpoint(_ checkpointer: Checkpointer) async throws(ReplicationError) {
        guard let sequence = progress.checkpointable else { return }
        if try await checkpointer.checkpoint(through: sequence, statistics: progress.currentStatistics) {
            progress.recordCheckpoint(sequence)
        }
    }

    // MARK: - The pipeline

    private func runPipeline(from start: SourceSequence, checkpointer: Checkpointer) async throws {
        let workers = settings.workerCount
        let queue = BoundedQueue<QueuedChange>(capacity: settings.workerBatchSize * workers * 2)
        let reader = ChangesReader(
            source: source,
            template: ChangesRequest(since: start, continuous: settings.continuous,
                                     allLeaves: !settings.winningRevisionsOnly, filter: settings.filter,
                                     heartbeatMilliseconds: min(10_000, max(200, settings.connectionTimeoutMilliseconds / 3)),
                                     timeoutMilliseconds: max(1000, settings.connectionTimeoutMilliseconds / 3)),
            retries: settings.retriesPerRequest, logger: logger)
        let finder = MissingRevisionFinder(target: target)
        // Bodies left on the source only for a target of this server, whose reads can fetch them.
        let onDemand = settings.attachmentsOnDemand && target is LocalEndpoint && source is RemoteEndpoint
        let fetcher = RevisionFetcher(source: source, logger: logger, keepsStubs: onDemand)
        let writer = RevisionWriter(target: target, logger: logger, transform: settings.transform,
                                    direction: DocumentTransform.direction(source: settings.source, target: settings.target),
                                    keepsAbsentBodies: onDemand)
        let copier = AttachedRevisionCopier(source: source, target: target, writer: writer, logger: logger)

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await reader.run(from: start, into: queue,
                                     caughtUp: { [weak self] in self?.readerIsCaughtUp(queue) },
                                     changesArrived: { [weak self] in self?.changesArrived() })
            }
            for _ in 0..<workers {
                group.addTask { try await self.work(queue, finder: finder, fetcher: fetcher, writer: writer, copier: copier) }
            }
            group.addTask { try await self.checkpointPeriodically(checkpointer) }
            group.addTask { await self.refreshPendingPeriodically() }
            // The reader and the workers end with a one-shot feed; the timers never do.
            for _ in 0..<(1 + workers) { try await group.next() }
            group.cancelAll()
        }
    }

    private func work(_ queue: BoundedQueue<QueuedChange>, finder: MissingRevisionFinder, fetcher: RevisionFetcher,
                      writer: RevisionWriter, copier: AttachedRevisionCopier) async throws {
        let progress = self.progress
        while true {
            guard let (batch, ticket) = await queue.takeBatch(maximum: settings.workerBatchSize, register: { items in
                progress.begin(items[items.count - 1].sequence)
            }) else { break }
            let changes = batch.compactMap { item -> Change? in
                if case .change(let change) = item { return change }
                return nil
            }
            var statistics = ReplicationStatistics()
            statistics.changesProcessed = changes.count
            if !changes.isEmpty {
                let missing = try await finder.find(changes)
                statistics.missingChecked = missing.checked
                statistics.missingFound = missing.found
                if !missing.requests.isEmpty {
                    statistics += try await copy(missing.requests, fetcher: fetcher, writer: writer, copier: copier)
                }
            }
            progress.complete(ticket, adding: statistics)
            if statistics.docsWritten > 0 { report(.progressed) }
            checkIdle(queue)
        }
        if Task.isCancelled { throw ReplicationError(.stopped, "stopped") }
    }

    /// Fetches chunk after chunk; each chunk is written while the next one is fetched.
    private func copy(_ requests: [RevisionRequest], fetcher: RevisionFetcher, writer: RevisionWriter,
                      copier: AttachedRevisionCopier) async throws -> ReplicationStatistics {
        var unfetched = requests[...]
        func nextChunk() -> [RevisionRequest]? {
            guard !unfetched.isEmpty else { return nil }
            let chunk = Array(unfetched.prefix(chunkLength()))
            unfetched = unfetched.dropFirst(chunk.count)
            return chunk
        }
        // Two children at a time: the write of chunk i and the fetch of chunk i + 1.
        var statistics = ReplicationStatistics()
        var next: RevisionFetcher.Result? = try await fetch(nextChunk()!, with: fetcher)
        while let current = next {
            let following = nextChunk()
            let (written, fetched) = try await withThrowingTaskGroup(
                of: Step.self, returning: (ReplicationStatistics, RevisionFetcher.Result?).self
            ) { group in
                group.addTask { .written(try await self.writeChunk(current, writer: writer, copier: copier)) }
                if let following { group.addTask { .fetched(try await self.fetch(following, with: fetcher)) } }
                var written = ReplicationStatistics()
                var fetched: RevisionFetcher.Result?
                for try await step in group {
                    switch step {
                    case .written(let result): written = result
                    case .fetched(let result): fetched = result
                    }
                }
                return (written, fetched)
            }
            statistics += written
            next = fetched
        }
        return statistics
    }

    private func fetch(_ chunk: [RevisionRequest], with fetcher: RevisionFetcher) async throws -> RevisionFetcher.Result {
        let fetched = try await fetcher.fetch(chunk)
        let sizes = fetched.revisions.map(\.encodedSize).filter { $0 > 0 }
        if !sizes.isEmpty {
            let average = sizes.reduce(0, +) / sizes.count
            lock.withLock { revisionSize = average }
        }
        return fetched
    }

    private func chunkLength() -> Int {
        let size = lock.withLock { revisionSize }
        guard size > 0 else { return Self.firstChunk }
        return min(Self.maximumChunk, max(1, Self.chunkBytes / size))
    }

    private enum Step: Sendable {
        case written(ReplicationStatistics)
        case fetched(RevisionFetcher.Result)
    }

    /// Writes a fetched chunk: revisions without attachments in one `_bulk_docs`, then
    /// those with attachments down their own road.
    private func writeChunk(_ fetched: RevisionFetcher.Result, writer: RevisionWriter,
                            copier: AttachedRevisionCopier) async throws(ReplicationError) -> ReplicationStatistics {
        var statistics = ReplicationStatistics()
        statistics.docsRead = fetched.revisions.count + fetched.withAttachments.count
        statistics.bulkGetAttempts = fetched.bulkGetAttempts
        statistics.bulkGetDocs = fetched.bulkGetDocs
        statistics.docWriteFailures = fetched.failures.count
        let result = try await writer.write(fetched.revisions)
        statistics.docsWritten = result.written
        statistics.docWriteFailures += result.failures
        if !fetched.withAttachments.isEmpty {
            statistics += try await copier.copy(fetched.withAttachments)
        }
        return statistics
    }

    private func checkpointPeriodically(_ checkpointer: Checkpointer) async throws {
        while true {
            try await ChangesReader.sleep(milliseconds: settings.checkpointIntervalMilliseconds)
            guard let sequence = progress.checkpointable else { continue }
            // A checkpoint under way is not cancelled with the pipeline: it finishes (on both
            // sides, or fails), and only then may the last checkpoint follow.
            let progress = self.progress
            let checkpoint = ReplicationTasks.throwingTask {
                if try await checkpointer.checkpoint(through: sequence, statistics: progress.currentStatistics) {
                    progress.recordCheckpoint(sequence)
                }
            }
            try await checkpoint.value
        }
    }

    private func refreshPendingPeriodically() async {
        while !Task.isCancelled {
            do {
                try await ChangesReader.sleep(milliseconds: 1000)
            } catch {
                return
            }
            // A continuous job that caught up has nothing pending (set to 0 then): asking anyway
            // cost a peer a thousand requests a second for a thousand waiting jobs.
            guard !isReportedIdle, let sequence = progress.latestCompleted,
                  let pending = try? await source.pendingChanges(since: sequence), !isReportedIdle else { continue }
            progress.setPending(pending)
        }
    }

    // MARK: - Idle and active

    private func readerIsCaughtUp(_ queue: BoundedQueue<QueuedChange>) {
        lock.lock()
        readerCaughtUp = true
        lock.unlock()
        checkIdle(queue)
    }

    private var isReportedIdle: Bool { lock.withLock { reportedIdle } }

    private func changesArrived() {
        lock.lock()
        readerCaughtUp = false
        let wasIdle = reportedIdle
        reportedIdle = false
        lock.unlock()
        if wasIdle { report(.changesArrived) }
    }

    /// Reports `caughtUp` once the reader waits and no batch is queued or in flight.
    private func checkIdle(_ queue: BoundedQueue<QueuedChange>) {
        guard settings.continuous, queue.count == 0, progress.isIdle else { return }
        lock.lock()
        let becameIdle = readerCaughtUp && !reportedIdle
        if becameIdle { reportedIdle = true }
        lock.unlock()
        if becameIdle {
            progress.setPending(0)
            report(.caughtUp)
        }
    }
}
