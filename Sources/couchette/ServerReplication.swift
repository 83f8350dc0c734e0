import CouchCore
import CouchReplication
import CurlClient
import Dispatch
import Foundation

/// `couchette replicate --server URL ...`: the replication runs on that Couchette (or
/// CouchDB) server as `POST /_replicate`, SOURCE and TARGET named as that server sees
/// them, and its progress is read from the server's live event feed
/// (`GET /_scheduler/jobs?feed=continuous`), so nothing runs in this process but HTTP.
struct ServerReplication {
    /// The server's root URL without credentials (`http://host:5984`).
    let root: String
    let authorization: [(name: String, value: String)]
    let body: JSONObject
    /// Progress on the terminal (redrawn in place) or as lines (`--progress` without one).
    let progress: ProgressOutput?
    /// The `_replicator` document the replication is saved as, rather than posted to
    /// `_replicate` (attachments on demand: the server must know the source for later reads).
    let savedAs: String?

    enum ProgressOutput { case terminal, lines }

    init(server: String, body: JSONObject, progress: ProgressOutput?, savedAs: String? = nil) throws {
        var url = server
        while url.hasSuffix("/") { url.removeLast() }
        guard let schemeEnd = url.range(of: "://") else { throw ServerReplicationError("--server must be an http(s) URL") }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var headers: [(name: String, value: String)] = []
        if let at = authority.lastIndex(of: "@") {
            let userInfo = String(authority[..<at])
            let decoded = userInfo.removingPercentEncoding ?? userInfo
            headers.append(("Authorization", "Basic " + Base64.encode(Array(decoded.utf8))))
            url = String(url[..<schemeEnd.upperBound]) + String(authority[authority.index(after: at)...]) + String(rest[authorityEnd...])
        }
        root = url
        authorization = headers
        self.body = body
        self.progress = progress
        self.savedAs = savedAs
    }

    /// What `_scheduler/jobs` calls this replication's source and target.
    private func displayNames() -> (source: String, target: String)? {
        guard let source = body["source"], let target = body["target"],
              let sourcePeer = try? ReplicationPeer(json: source, role: "source"),
              let targetPeer = try? ReplicationPeer(json: target, role: "target") else { return nil }
        return (sourcePeer.displayName, targetPeer.displayName)
    }

    /// Runs the replication; returns the server's status and answer (for a continuous one,
    /// once interrupted: the answer to its cancellation).
    func run() throws -> (status: Int, body: [UInt8]) {
        if let savedAs { return try runSaved(id: savedAs) }
        let client = HTTPClient()
        defer { client.shutdown() }
        let names = displayNames()
        let box = AnswerBox()
        let done = DispatchSemaphore(value: 0)
        let progress = self.progress
        let continuous = body["continuous"]?.boolValue == true
        let ended = DispatchSemaphore(value: 0)
        let feed = Task {
            guard progress != nil, let names else { return }
            await follow(client: client, ended: ended) { event in
                event["source"]?.stringValue == names.source && event["target"]?.stringValue == names.target
                    && event["doc_id"]?.isNull ?? true
            }
        }
        let request = self.request("POST", "/_replicate", body: .object(body))
        Task {
            do {
                let response = try await client.send(request)
                box.answer = (response.status, response.body)
            } catch {
                box.answer = (0, Array("{\"error\":\"unreachable\",\"reason\":\"\(root): \(error)\"}".utf8))
            }
            if !continuous || (box.answer?.status ?? 0) >= 300 || box.answer?.status == 0 { done.signal() }
        }
        ShutdownSignals.onSignal { _ in
            box.interrupted = true
            done.signal()
        }
        done.wait()
        if box.interrupted && continuous {
            var cancel = body
            cancel["cancel"] = true
            let cancelled = DispatchSemaphore(value: 0)
            let cancelRequest = self.request("POST", "/_replicate", body: .object(cancel))
            Task {
                if let response = try? await client.send(cancelRequest) { box.answer = (response.status, response.body) }
                cancelled.signal()
            }
            cancelled.wait()
        }
        // The job's last event (completed, failed) may trail the answer a little.
        if !box.interrupted, progress != nil, names != nil, (200..<300).contains(box.answer?.status ?? 0) {
            _ = ended.wait(timeout: .now() + .seconds(2))
        }
        feed.cancel()
        if progress == .terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        return box.answer ?? (0, [])
    }

    private func request(_ method: String, _ path: String, body: JSONValue? = nil) -> HTTPClient.Request {
        var headers = authorization + [("Accept", "application/json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        return HTTPClient.Request(method: method, url: root + path, headers: headers, body: body?.serialized())
    }

    /// Saves the replication as `_replicator/ID` and watches its `_scheduler/docs` entry until it
    /// completes or fails (a continuous one: until interrupted; it goes on running on the
    /// server). Returns that entry, with 200 when the replication completed or goes on.
    private func runSaved(id: String) throws -> (status: Int, body: [UInt8]) {
        let client = HTTPClient()
        defer { client.shutdown() }
        let box = AnswerBox()
        let done = DispatchSemaphore(value: 0)
        let path = "/_replicator/" + PercentEncoding.encode(id)
        let continuous = body["continuous"]?.boolValue == true
        let feed = Task {
            guard progress != nil else { return }
            await follow(client: client) { $0["doc_id"]?.stringValue == id }
        }
        defer { feed.cancel() }
        ShutdownSignals.onSignal { _ in
            box.interrupted = true
            done.signal()
        }
        let save = request("PUT", path, body: .object(body))
        let poll = request("GET", "/_scheduler/docs" + path)
        Task {
            do {
                let saved = try await client.send(save)
                guard (200..<300).contains(saved.status) else {
                    box.answer = (saved.status, saved.body)
                    done.signal()
                    return
                }
                while !box.interrupted {
                    let state = try await client.send(poll)
                    box.answer = (state.status, state.body)
                    let name = (try? JSONValue.parse(state.body))?["state"]?.stringValue
                    if name == "failed" || (name == "completed" && !continuous) { break }
                    try await Task.sleep(nanoseconds: 250_000_000)
                }
            } catch {
                box.answer = (0, Array("{\"error\":\"unreachable\",\"reason\":\"\(root): \(error)\"}".utf8))
            }
            done.signal()
        }
        done.wait()
        if progress == .terminal { FileHandle.standardError.write(Data("\n".utf8)) }
        guard var answer = box.answer else { return (0, []) }
        let state = (try? JSONValue.parse(answer.body))?["state"]?.stringValue
        if state == "failed" { answer.status = 500 }
        if box.interrupted, answer.status == 200 {
            FileHandle.standardError.write(Data("it keeps running on the server as _replicator/\(id): delete that document to stop it\n".utf8))
        }
        return answer
    }

    /// Reads the event feed and draws each event `matching` picks as this replication's job's;
    /// signals `ended` at the job's last event (completed or failed).
    private func follow(client: HTTPClient, ended: DispatchSemaphore? = nil, matching: (JSONObject) -> Bool) async {
        guard let response = try? await client.stream(request("GET", "/_scheduler/jobs?feed=continuous&heartbeat=10000"),
                                                      framing: .lines),
              response.status == 200 else { return }
        defer { response.cancel() }
        while !Task.isCancelled, let line = try? await response.nextLine() {
            guard !line.isEmpty, let event = try? JSONValue.parse(line).objectValue, matching(event) else { continue }
            draw(event)
            if ["completed", "failed"].contains(event["state"]?.stringValue ?? "") { ended?.signal() }
        }
    }

    /// `[#####-----]  52%  5200/10000 changes  running (active)`, with the last error if any.
    private func draw(_ event: JSONObject) {
        let completed = event["completed"]?.intValue ?? 0
        let total = max(event["total"]?.intValue ?? 0, completed)
        let state = event["state"]?.stringValue ?? "?"
        let finished = state == "completed"
        let fraction = total > 0 ? Double(completed) / Double(total) : (finished ? 1 : 0)
        let width = 30
        let filled = max(0, min(width, Int(fraction * Double(width))))
        var line = "[\(String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled))] "
            + "\(String(format: "%3d", Int(fraction * 100)))%  \(completed)/\(total) changes  \(state)"
            + " (\(event["status"]?.stringValue ?? "?"))"
        if let reason = event["last_error"]?["reason"]?.stringValue { line += "  (\(reason))" }
        switch progress {
        case .terminal?: FileHandle.standardError.write(Data(("\r" + line + "\u{1B}[K").utf8))
        case .lines?: FileHandle.standardError.write(Data((line + "\n").utf8))
        case nil: break
        }
    }
}

struct ServerReplicationError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the waiting main thread and the tasks share.
private final class AnswerBox: @unchecked Sendable {
    private let lock = NSLock()
    private var storedAnswer: (status: Int, body: [UInt8])?
    private var storedInterrupted = false

    var answer: (status: Int, body: [UInt8])? {
        get { lock.withLock { storedAnswer } }
        set { lock.withLock { storedAnswer = newValue } }
    }

    var interrupted: Bool {
        get { lock.withLock { storedInterrupted } }
        set { lock.withLock { storedInterrupted = newValue } }
    }
}
