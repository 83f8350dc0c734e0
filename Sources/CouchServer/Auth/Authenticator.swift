import CouchCore
import CouchStore
import Foundation
import Logging

/// Who a request comes from, and a fresh session cookie to send back when its
/// `AuthSession` is due for renewal.
struct Authentication: Sendable {
    let user: UserContext
    let renewedCookie: String?
}

/// CouchDB's authentication handlers, tried in the order `[chttpd] authentication_handlers`
/// gives (by default `cookie` then `default`): `jwt` (a `Bearer` token), `proxy` (headers
/// from a trusted proxy), `cookie` (a valid `AuthSession` cookie), `default` (HTTP Basic).
/// The first that recognises the request decides. With no server admin, a request without
/// credentials is an admin (the admin party, `default`'s doing); otherwise it is anonymous.
final class Authenticator: Sendable {
    static let incorrect = CouchError(.unauthorized, "Name or password is incorrect.")

    let credentials: CredentialStore
    let hasher: PasswordHasher
    let cookie: SessionCookie
    let requireValidUser: Bool
    let settings: AuthenticationSettings
    let lockout: LoginLockout
    private let logger = Logger(label: "couchette.auth")

    init(credentials: CredentialStore, hasher: PasswordHasher, cookie: SessionCookie, requireValidUser: Bool,
         settings: AuthenticationSettings = AuthenticationSettings(), lockout: LoginLockout = LoginLockout()) {
        self.credentials = credentials
        self.hasher = hasher
        self.cookie = cookie
        self.requireValidUser = requireValidUser
        self.settings = settings
        self.lockout = lockout
    }

    var isAdminParty: Bool { credentials.admins.isEmpty && !requireValidUser }

    /// The handlers' names, as `_session` lists them.
    var handlerNames: [String] { settings.handlers.map(\.rawValue) }

    func authenticate(_ request: HTTPRequest) throws(CouchError) -> Authentication {
        for handler in settings.handlers {
            switch handler {
            case .jwt:
                if let user = try JSONWebTokenAuthentication.user(request, settings: settings.jwt) {
                    return Authentication(user: user, renewedCookie: nil)
                }
            case .proxy:
                if let user = ProxyAuthentication.user(request, settings: settings.proxy) {
                    return Authentication(user: user, renewedCookie: nil)
                }
            case .cookie:
                if let session = try cookieSession(request) { return session }
            case .basic:
                if let basic = try BasicCredentials.parse(request.header("authorization")) {
                    let user = try verify(name: basic.name, password: basic.password, handler: "default",
                                          peer: request.peerAddress, countingUnknownUsers: false)
                    return Authentication(user: user, renewedCookie: nil)
                }
                if isAdminParty { return Authentication(user: .adminParty, renewedCookie: nil) }
            }
        }
        return Authentication(user: .anonymous, renewedCookie: nil)
    }

    /// Checks a name and password (Basic, or a `POST /_session` login), after the lockout
    /// (CouchDB's `couch_httpd_auth:authenticate`). A Basic login of an unknown user is not
    /// counted, as in CouchDB (its handler refuses before checking); a session login is.
    func verify(name: String, password: String, handler: String, peer: UInt32,
                countingUnknownUsers: Bool = true) throws(CouchError) -> UserContext {
        // An unknown user costs a password check too: the answer's time must not tell who exists.
        let stored = try credentials.credentials(for: name)
        let salt = stored?.hash.salt ?? ""
        if stored != nil || countingUnknownUsers {
            try lockout.check(peer: peer, user: name, salt: salt, settings: settings.lockout) { message in
                logger.warning("\(message)")
            }
        }
        let matches: Bool
        if let stored {
            matches = try hasher.verify(password, against: stored.hash, name: name)
        } else {
            matches = try hasher.verifyUnknown(password)
        }
        guard let stored, matches else {
            if stored != nil || countingUnknownUsers {
                lockout.recordFailure(peer: peer, user: name, salt: salt, settings: settings.lockout)
            }
            // Quoted and escaped as JSON: a name is the client's, and may hold line breaks.
            logger.warning("authentication failed for user \(JSONValue(name).serializedString())")
            throw Self.incorrect
        }
        if settings.upgradeHashOnAuth, let document = stored.document,
           PasswordUpgrade.needed(stored.hash, hasher: hasher) {
            PasswordUpgrade.start(name: name, password: password, document: document, hasher: hasher,
                                  database: credentials.usersDatabase, databases: credentials.databases)
        }
        return UserContext(name: name, roles: stored.roles, authenticatedBy: handler)
    }

    /// The credentials of a request whose answer may cost a password check, as a key
    /// (`PasswordHasher.credentialsKey`): a login (`POST /_session`, keyed by its body), or
    /// HTTP Basic credentials (when the `default` handler is on) whose name and password have
    /// not passed one yet; nil for any other. Such requests are answered off the listener, so
    /// that a check, or waiting for one, never holds a listener thread. Only where the request
    /// is answered depends on it.
    func passwordCheckKey(_ request: HTTPRequest) -> Int? {
        if request.method == "POST",
           request.path.utf8.split(separator: UInt8(ascii: "/")).first?.elementsEqual("_session".utf8) == true {
            var hasher = Hasher()
            hasher.combine(request.body)
            return hasher.finalize()
        }
        guard settings.handlers.contains(.basic), let header = request.header("authorization"),
              let basic = try? BasicCredentials.parse(header),
              hasher.mayNeedCheck(name: basic.name, password: basic.password) else { return nil }
        return PasswordHasher.credentialsKey(basic.name, basic.password)
    }

    /// The salt a user's session cookies are signed with, if the user still exists.
    func cookieSalt(for name: String) -> String? {
        (try? credentials.credentials(for: name))?.hash.salt
    }

    /// An `AuthSession` cookie that is genuine, unexpired and names an existing user
    /// authenticates; any other (expired, forged, user gone) is ignored, as CouchDB does.
    private func cookieSession(_ request: HTTPRequest) throws(CouchError) -> Authentication? {
        guard let value = SessionCookie.value(inCookieHeader: request.header("cookie")), !value.isEmpty else { return nil }
        let contents = try SessionCookie.parse(value)
        let now = SessionCookie.now()
        guard let stored = try credentials.credentials(for: contents.user),
              let secondsLeft = cookie.secondsLeft(contents, salt: stored.hash.salt, now: now) else { return nil }
        let user = UserContext(name: contents.user, roles: stored.roles, authenticatedBy: "cookie")
        var renewed: String?
        if cookie.isDueForRenewal(secondsLeft: secondsLeft) {
            renewed = cookie.setCookie(cookie.value(user: contents.user, salt: stored.hash.salt, time: now), now: now)
        }
        return Authentication(user: user, renewedCookie: renewed)
    }
}
