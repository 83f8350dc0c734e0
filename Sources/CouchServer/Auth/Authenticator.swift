import CouchCore
import CouchStore
import Logging

/// Who a request comes from, and a fresh session cookie to send back when its
/// `AuthSession` is due for renewal.
struct Authentication: Sendable {
    let user: UserContext
    let renewedCookie: String?
}

/// CouchDB's two default authentication handlers, in its order: `cookie` (a valid
/// `AuthSession` cookie) then `default` (HTTP Basic). With no server admin, a request
/// without credentials is an admin (the admin party); otherwise it is anonymous.
final class Authenticator: Sendable {
    static let handlerNames = ["cookie", "default"]
    static let incorrect = CouchError(.unauthorized, "Name or password is incorrect.")

    let credentials: CredentialStore
    let hasher: PasswordHasher
    let cookie: SessionCookie
    let requireValidUser: Bool
    private let logger = Logger(label: "couchette.auth")

    init(credentials: CredentialStore, hasher: PasswordHasher, cookie: SessionCookie, requireValidUser: Bool) {
        self.credentials = credentials
        self.hasher = hasher
        self.cookie = cookie
        self.requireValidUser = requireValidUser
    }

    var isAdminParty: Bool { credentials.admins.isEmpty && !requireValidUser }

    func authenticate(_ request: HTTPRequest) throws(CouchError) -> Authentication {
        if let session = try cookieSession(request) { return session }
        if let basic = try BasicCredentials.parse(request.header("authorization")) {
            return Authentication(user: try verify(name: basic.name, password: basic.password, handler: "default"),
                                  renewedCookie: nil)
        }
        return Authentication(user: isAdminParty ? .adminParty : .anonymous, renewedCookie: nil)
    }

    /// Checks a name and password (Basic, or a `POST /_session` login).
    func verify(name: String, password: String, handler: String) throws(CouchError) -> UserContext {
        // An unknown user costs a password check too: the answer's time must not tell who exists.
        let stored = credentials.credentials(for: name)
        let matches: Bool
        if let stored {
            matches = try hasher.verify(password, against: stored.hash)
        } else {
            matches = try hasher.verifyUnknown(password)
        }
        guard let stored, matches else {
            // Quoted and escaped as JSON: a name is the client's, and may hold line breaks.
            logger.warning("authentication failed for user \(JSONValue(name).serializedString())")
            throw Self.incorrect
        }
        return UserContext(name: name, roles: stored.roles, authenticatedBy: handler)
    }

    /// The salt a user's session cookies are signed with, if the user still exists.
    func cookieSalt(for name: String) -> String? {
        credentials.credentials(for: name)?.hash.salt
    }

    /// An `AuthSession` cookie that is genuine, unexpired and names an existing user
    /// authenticates; any other (expired, forged, user gone) is ignored, as CouchDB does.
    private func cookieSession(_ request: HTTPRequest) throws(CouchError) -> Authentication? {
        guard let value = SessionCookie.value(inCookieHeader: request.header("cookie")), !value.isEmpty else { return nil }
        let contents = try SessionCookie.parse(value)
        let now = SessionCookie.now()
        guard let stored = credentials.credentials(for: contents.user),
              let secondsLeft = cookie.secondsLeft(contents, salt: stored.hash.salt, now: now) else { return nil }
        let user = UserContext(name: contents.user, roles: stored.roles, authenticatedBy: "cookie")
        var renewed: String?
        if cookie.isDueForRenewal(secondsLeft: secondsLeft) {
            renewed = cookie.setCookie(cookie.value(user: contents.user, salt: stored.hash.salt, time: now), now: now)
        }
        return Authentication(user: user, renewedCookie: renewed)
    }
}
