import CouchCore
import CurlClient
import Foundation
import Logging

/// How requests to one remote peer prove who they come from, after CouchDB's replicator:
///
/// - user and password (in the URL, `auth.basic` or a Basic `Authorization` header) go
///   first to `POST /_session` at the server root, form-encoded; requests then carry the
///   `AuthSession` cookie, renewed before 90 % of its `Max-Age` (550 s without one), when
///   the peer sends a new one, and after a 401/403 with the current cookie. A peer without
///   `_session` (404) gets Basic authentication on every request instead; one whose
///   `_session` itself demands Basic credentials gets them there too.
/// - `auth.oauth` signs every request (OAuth 1.0a, HMAC-SHA1).
///
/// Credentials never leave this type except in the headers of requests to the peer.
final class PeerAuthenticator: @unchecked Sendable {
    private enum Mode {
        case none
        case basic(RemotePeer.Credentials)
        case session(RemotePeer.Credentials)
        case oauth(OAuthSigner)
    }

    private let peer: RemotePeer
    private let client: HTTPClient
    private let logger: Logger
    private let lock = NSLock()
    private var mode: Mode
    private var cookie: String?
    private var epoch = 0
    private var refreshedAt = Date.distantPast
    private var nextRefresh = Date.distantPast
    private var sessionNeedsBasic = false
    private var login: Task<Void, Error>?

    /// A cookie younger than this that fails is not renewed at once (no busy loop against a
    /// peer that issues bad cookies), as CouchDB's `session_min_update_interval`.
    var minimumRefreshInterval: TimeInterval = 5
    static let defaultRefreshInterval: TimeInterval = 550

    init(peer: RemotePeer, client: HTTPClient, logger: Logger) {
        self.peer = peer
        self.client = client
        self.logger = logger
        if let oauth = peer.oauth {
            mode = .oauth(OAuthSigner(credentials: oauth))
        } else if let credentials = peer.credentials {
            mode = .session(credentials)
        } else {
            mode = .none
        }
    }

    /// The headers that authenticate a request, and the cookie epoch they used.
    func headers(method: String, url: String) async throws(ReplicationError) -> (headers: [(name: String, value: String)], epoch: Int) {
        if needsLogin() { try await refreshSession() }
        return currentHeaders(method: method, url: url)
    }

    private func needsLogin() -> Bool {
        lock.withLock {
            if case .session = mode { return Date() >= nextRefresh }
            return false
        }
    }

    private func currentHeaders(method: String, url: String) -> (headers: [(name: String, value: String)], epoch: Int) {
        lock.withLock {
            switch mode {
            case .none: return ([], epoch)
            case .basic(let credentials): return ([("Authorization", Self.basic(credentials))], epoch)
            case .oauth(let signer): return ([("Authorization", signer.authorization(method: method, url: url))], epoch)
            case .session:
                guard let cookie else { return ([], epoch) }
                return ([("Cookie", "AuthSession=" + cookie)], epoch)
            }
        }
    }

    /// Looks at a response: keeps a renewed cookie; after an authentication failure with
    /// the current cookie, schedules a new session and says whether to retry at once.
    func shouldRetry(after response: HTTPClient.Response, epoch usedEpoch: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard case .session = mode else { return false }
        if (200..<300).contains(response.status) {
            if let (value, maxAge) = Self.sessionCookie(in: response), value != cookie { adopt(value, maxAge: maxAge) }
            return false
        }
        guard response.status == 401 || response.status == 403 else { return false }
        if epoch > usedEpoch { return true }  // a newer cookie exists already
        if Date().timeIntervalSince(refreshedAt) < minimumRefreshInterval {
            nextRefresh = refreshedAt.addingTimeInterval(minimumRefreshInterval)
            return false
        }
        nextRefresh = .distantPast
        return true
    }

    private func adopt(_ value: String, maxAge: Int?) {
        cookie = value
        epoch += 1
        refreshedAt = Date()
        let interval = maxAge.map { TimeInterval($0) * 0.9 } ?? Self.defaultRefreshInterval
        nextRefresh = refreshedAt.addingTimeInterval(interval)
    }

    /// Logs in once for all waiting requests.
    private func refreshSession() async throws(ReplicationError) {
        let task: Task<Void, Error> = lock.withLock {
            if let login { return login }
            let task = ReplicationTasks.throwingTask { try await self.performLogin() }
            login = task
            return task
        }
        do {
            try await task.value
        } catch let error as ReplicationError {
            clearLogin(task)
            throw error
        } catch {
            clearLogin(task)
            throw ReplicationError(.stopped, "stopped")
        }
        clearLogin(task)
    }

    private func clearLogin(_ task: Task<Void, Error>) {
        lock.withLock {
            if login == task { login = nil }
        }
    }

    private func performLogin() async throws {
        let state: (RemotePeer.Credentials, Bool)? = lock.withLock {
            guard case .session(let credentials) = mode, Date() >= nextRefresh else { return nil }
            return (credentials, sessionNeedsBasic)
        }
        guard let (credentials, needsBasic) = state else { return }

        let url = peer.rootURL + "_session"
        var headers: [(name: String, value: String)] = [("Content-Type", "application/x-www-form-urlencoded"),
                                                        ("Accept", "application/json")]
        if needsBasic { headers.append(("Authorization", Self.basic(credentials))) }
        let body = Array(URLEncoding.form([("name", credentials.user), ("password", credentials.password)]).utf8)
        let response: HTTPClient.Response
        do {
            response = try await client.send(HTTPClient.Request(method: "POST", url: url, headers: headers, body: body,
                                                                tls: peer.tls, timeoutMilliseconds: 60_000))
        } catch .cannotConnect(let message) {
            throw ReplicationError(.peerUnreachable, "could not reach \(peer.rootURL): \(message)")
        } catch .tls(let message) {
            // A certificate that cannot be trusted will not become trustworthy by retrying.
            throw ReplicationError(.forbidden, "session request to \(peer.rootURL)_session failed: TLS: \(message)")
        } catch {
            throw ReplicationError(.requestFailed, "session request to \(peer.rootURL)_session failed: \(error)")
        }
        switch response.status {
        case 200..<300:
            guard let (value, maxAge) = Self.sessionCookie(in: response) else {
                // A peer that accepts the login but sets no cookie: use Basic authentication.
                lock.withLock { mode = .basic(credentials) }
                return
            }
            lock.withLock { adopt(value, maxAge: maxAge) }
        case 401 where response.header("WWW-Authenticate") != nil && !needsBasic:
            lock.withLock { sessionNeedsBasic = true }
            try await performLogin()
        case 401:
            throw ReplicationError(.unauthorized, "unauthorized to access or create database \(peer.displayURL)")
        case 403:
            throw ReplicationError(.forbidden, "forbidden to access or create database \(peer.displayURL)")
        case 404, 405, 501:
            logger.debug("\(peer.rootURL) has no _session; using basic authentication")
            lock.withLock { mode = .basic(credentials) }
        case 500...:
            throw ReplicationError(.requestFailed, "session request to \(peer.rootURL)_session failed with status \(response.status)")
        default:
            throw ReplicationError(.unauthorized, "unexpected status \(response.status) from \(peer.rootURL)_session")
        }
    }

    static func basic(_ credentials: RemotePeer.Credentials) -> String {
        "Basic " + Base64.encode(Array((credentials.user + ":" + credentials.password).utf8))
    }

    /// `AuthSession` and its `Max-Age` from the response's `Set-Cookie` headers.
    static func sessionCookie(in response: HTTPClient.Response) -> (String, Int?)? {
        for header in response.headerValues("Set-Cookie") {
            var value: String?
            var maxAge: Int?
            for attribute in header.split(separator: ";") {
                let parts = attribute.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                let text = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
                if name.caseInsensitiveCompare("AuthSession") == .orderedSame { value = text }
                if name.caseInsensitiveCompare("Max-Age") == .orderedSame, let number = Int(text), number >= 0 {
                    maxAge = number
                }
            }
            if let value, !value.isEmpty { return (value, maxAge) }
        }
        return nil
    }
}
