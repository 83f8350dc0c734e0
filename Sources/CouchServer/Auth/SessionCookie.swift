import CouchCore
import Foundation

/// CouchDB's `AuthSession` cookie: `base64url(NAME ":" TIME ":" MAC)` where TIME is the
/// issue time in hex seconds and MAC is an HMAC of `NAME:TIME` keyed by the server secret
/// followed by the user's password salt, so that changing a password ends its sessions.
/// CouchDB 3.4 uses HMAC-SHA256 as here; a cookie is valid for `timeout` seconds and
/// renewed on a response once a tenth of that has passed.
struct SessionCookie: Sendable {
    static let name = "AuthSession"
    static let malformed = CouchError(.badRequest, "Malformed AuthSession cookie. Please clear your cookies.")

    let secret: [UInt8]
    let timeout: Int
    let persistent: Bool
    let sameSite: String?

    struct Contents: Equatable {
        let user: String
        let timeText: String
        let mac: [UInt8]
    }

    /// The cookie's value for `user` issued at `time` (seconds since 1970).
    func value(user: String, salt: String, time: Int) -> String {
        let session = user + ":" + String(time, radix: 16, uppercase: true)
        var bytes = Array(session.utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: mac(session, salt: salt))
        return Base64URL.encode(bytes)
    }

    private func mac(_ session: String, salt: String) -> [UInt8] {
        Digest.hmac(.sha256, key: secret + Array(salt.utf8), message: Array(session.utf8))
    }

    /// Splits a cookie value; `bad_request` when it is not one, as CouchDB answers.
    static func parse(_ value: String) throws(CouchError) -> Contents {
        guard let bytes = Base64URL.decode(value) else { throw malformed }
        let colon = UInt8(ascii: ":")
        guard let first = bytes.firstIndex(of: colon),
              let second = bytes[(first + 1)...].firstIndex(of: colon),
              let user = String(validating: bytes[..<first], as: UTF8.self),
              let timeText = String(validating: bytes[(first + 1)..<second], as: UTF8.self) else { throw malformed }
        return Contents(user: user, timeText: timeText, mac: Array(bytes[(second + 1)...]))
    }

    /// Seconds left when the cookie is genuine and unexpired for a user with `salt`; nil otherwise.
    func secondsLeft(_ contents: Contents, salt: String, now: Int) -> Int? {
        // The time is the client's text until the MAC is checked: no arithmetic on it may trap.
        guard let issued = Int(contents.timeText, radix: 16) else { return nil }
        let (expiry, overflow) = issued.addingReportingOverflow(timeout)
        guard !overflow, now < expiry else { return nil }
        let expected = mac(contents.user + ":" + contents.timeText, salt: salt)
        guard Digest.constantTimeEquals(expected, contents.mac) else { return nil }
        return expiry - now
    }

    /// Whether a session with `secondsLeft` should get a fresh cookie (CouchDB: outside the first 10%).
    func isDueForRenewal(secondsLeft: Int) -> Bool {
        Double(secondsLeft) < Double(timeout) * 0.9
    }

    /// A `Set-Cookie` value; an empty `value` clears the cookie.
    func setCookie(_ value: String, now: Int) -> String {
        var attributes = ["\(Self.name)=\(value)", "Version=1"]
        if value.isEmpty {
            attributes += ["Expires=\(Timestamp.rfc1123(0))", "Max-Age=0"]
        } else if persistent {
            attributes += ["Expires=\(Timestamp.rfc1123(now + timeout))", "Max-Age=\(timeout)"]
        }
        attributes += ["Path=/", "HttpOnly"]
        if let sameSite { attributes.append("SameSite=\(sameSite)") }
        return attributes.joined(separator: "; ")
    }

    /// The `AuthSession` value among a request's cookies.
    static func value(inCookieHeader header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.trimmingWhitespace()
            guard trimmed.hasPrefix(name + "=") else { continue }
            return String(trimmed.dropFirst(name.count + 1)).trimmingCharacters(in: "\"")
        }
        return nil
    }

    static func now() -> Int { Int(Date().timeIntervalSince1970) }
}

/// The server's cookie secret: random, created once and kept in the data directory,
/// readable by its owner only, so sessions survive a restart.
enum SessionSecret {
    static let fileName = "session-secret"

    static func load(directory: String) throws(ConfigurationError) -> [UInt8] {
        let path = directory + "/" + fileName
        if let text = PrivateFile.read(path)?.trimmingWhitespace(), text.count == 64,
           let bytes = Base16.decode(text.utf8) {
            return bytes
        }
        let secret = Digest.randomBytes(32)
        try PrivateFile.write(Digest.hex(secret) + "\n", to: path)
        return secret
    }
}

/// Base64 with the URL alphabet and no padding, as CouchDB writes cookies; standard
/// Base64 (for `Authorization: Basic`) is read by `decodeStandard`.
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: String) -> [UInt8]? {
        guard !text.contains("+"), !text.contains("/") else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.utf8.count % 4 != 0 { standard += "=" }
        return decodeStandard(standard)
    }

    static func decodeStandard(_ text: String) -> [UInt8]? {
        Data(base64Encoded: text).map { Array($0) }
    }
}
