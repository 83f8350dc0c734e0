import CouchCore
import CouchStore
import Foundation

/// CouchDB 3's resharding (`/_reshard`) on one node whose databases are single files: a split
/// job only rewrites the database's shard map (`ShardMap`); documents stay where they are, so
/// a job completes as soon as it runs. Jobs and the global state live in memory (CouchDB
/// keeps them in `_dbs`): a restart forgets them, not the splits they made.
final class Resharding: Sendable {
    struct Job: Sendable {
        let id: String
        let database: DatabaseName
        /// The database instance the job splits: a database deleted (or made again) ends its jobs.
        let instance: String
        let source: ShardRange
        let sourceName: String
        let targetNames: [String]
        let node: String
        var jobState: String
        var splitState = "new"
        var reason: String?
        var startTime = 0
        var updateTime: Int
        var history: [(time: Int, type: String, detail: String?)]

        var json: JSONValue {
            [
                "id": JSONValue(id), "type": "split", "source": JSONValue(sourceName),
                "target": .array(targetNames.map { JSONValue($0) }),
                "job_state": JSONValue(jobState), "split_state": JSONValue(splitState),
                "state_info": .object(reason.map { ["reason": JSONValue($0)] } ?? JSONObject()),
                "node": JSONValue(node), "start_time": JSONValue(Timestamp.iso8601(startTime)),
                "update_time": JSONValue(Timestamp.iso8601(updateTime)),
                "history": .array(history.map { entry in
                    ["timestamp": JSONValue(Timestamp.iso8601(entry.time)), "type": JSONValue(entry.type),
                     "detail": entry.detail.map { JSONValue($0) } ?? .null]
                }),
            ]
        }
    }

    /// What a job went through when it ran, as CouchDB's history names the steps.
    private static let splitSteps = ["initial_copy", "topoff1", "build_indices", "topoff2", "copy_local_docs",
                                     "update_shardmap", "wait_source_close", "topoff3", "source_delete"]
    static let disabledReason = "Shard splitting disabled"
    /// CouchDB's `[reshard] max_jobs` default: jobs are kept until deleted.
    static let maximumJobs = 48

    private struct State {
        var isRunning = true
        var reason: String?
        var jobs: [Job] = []
    }

    private let state = Locked(State())
    /// One job runs at a time: each reads and rewrites a database's shard map.
    private let splitting = Locked(())

    private static var now: Int { Int(Date().timeIntervalSince1970) }

    /// The global state: running (nil reason unless given) or stopped with a reason.
    var globalState: (running: Bool, reason: String?) {
        state.withLock { ($0.isRunning, $0.reason) }
    }

    /// The jobs, without those whose database is gone.
    func jobs(in databases: DatabaseManager) -> [Job] {
        let jobs = state.withLock { $0.jobs }
        let gone = Set(jobs.filter { job in
            !databases.exists(job.database) || (try? databases.database(job.database))?.instanceStartTime != job.instance
        }.map(\.id))
        guard !gone.isEmpty else { return jobs }
        return state.withLock { state in
            state.jobs.removeAll { gone.contains($0.id) }
            return state.jobs
        }
    }

    func job(_ id: String, in databases: DatabaseManager) -> Job? {
        jobs(in: databases).first { $0.id == id }
    }

    /// Adds a split job for `range` of `database`; it runs at once unless resharding is stopped.
    func addJob(database: Database, range: ShardRange, node: String) -> Result<Job, CouchError> {
        let targets = (range.halves ?? []).map { ShardMap.shardName($0, of: database) }
        guard !targets.isEmpty else {
            return .failure(CouchError.named("shard_range_cannot_be_split", range.name))
        }
        let time = Self.now
        guard state.withLock({ $0.jobs.count }) < Self.maximumJobs else {
            return .failure(CouchError.named("max_jobs_exceeded", String(Self.maximumJobs)))
        }
        let job = Job(id: "001-" + Digest.randomHex(bytes: 32), database: database.name, instance: database.instanceStartTime,
                      source: range, sourceName: ShardMap.shardName(range, of: database), targetNames: targets, node: node,
                      jobState: "new", updateTime: time, history: [(time, "new", nil)])
        state.withLock { $0.jobs.append(job) }
        if globalState.running {
            run(job.id, database: database)
        } else {
            update(job.id) { job in
                job.jobState = "stopped"
                job.reason = Self.disabledReason
                job.history.append((Self.now, "stopped", Self.disabledReason))
            }
        }
        return .success(self.state.withLock { state in state.jobs.first { $0.id == job.id } ?? job })
    }

    /// Runs a new or stopped job: the split of the shard map, then "completed" (or "failed"
    /// when the map no longer holds its range).
    func run(_ id: String, database: Database) {
        splitting.withLock { _ in runAlone(id, database: database) }
    }

    private func runAlone(_ id: String, database: Database) {
        guard let job = state.withLock({ $0.jobs.first { $0.id == id } }), job.jobState != "completed" else { return }
        let split = Result { try ShardMap.split(job.source, of: database) }
        update(id) { job in
            let time = Self.now
            job.startTime = time
            job.reason = nil
            switch split {
            case .success(true):
                job.history += Self.splitSteps.map { (time, "running", $0) } + [(time, "completed", nil)]
                job.jobState = "completed"
                job.splitState = "completed"
            case .success(false), .failure:
                let reason = if case .failure(let error) = split { "\(error)" } else { "source shard not found" }
                job.history.append((time, "failed", reason))
                job.jobState = "failed"
                job.reason = reason
            }
        }
    }

    /// Stops a job that has not completed (CouchDB answers ok for one that has).
    func stop(_ id: String, reason: String) {
        update(id) { job in
            guard job.jobState == "new" || job.jobState == "running" || job.jobState == "stopped" else { return }
            job.jobState = "stopped"
            job.reason = reason
            job.history.append((Self.now, "stopped", reason))
        }
    }

    func remove(_ id: String) {
        state.withLock { $0.jobs.removeAll { $0.id == id } }
    }

    /// Stops every job from starting (running ones are instant); `reason` is shown.
    func stopAll(reason: String) {
        state.withLock { state in
            state.isRunning = false
            state.reason = reason
        }
    }

    /// Resharding runs again: the jobs it held back run.
    func startAll(in databases: DatabaseManager) {
        let waiting = state.withLock { state -> [Job] in
            state.isRunning = true
            state.reason = nil
            return state.jobs.filter { $0.jobState == "stopped" && $0.reason == Self.disabledReason }
        }
        for job in waiting {
            guard let database = try? databases.database(job.database), database.instanceStartTime == job.instance else { continue }
            run(job.id, database: database)
        }
    }

    private func update(_ id: String, _ change: (inout Job) -> Void) {
        state.withLock { state in
            guard let index = state.jobs.firstIndex(where: { $0.id == id }) else { return }
            change(&state.jobs[index])
            state.jobs[index].updateTime = Self.now
        }
    }
}
