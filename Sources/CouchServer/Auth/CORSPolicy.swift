import CouchCore

/// Cross-origin requests as CouchDB's `chttpd_cors` answers them: a preflight `OPTIONS`
/// from an allowed origin gets 204 with the allowed methods and headers; any other
/// response to an allowed origin gets `Access-Control-Allow-Origin` (the origin itself,
/// never `*`), `Access-Control-Allow-Credentials` when configured, and the headers it may
/// read. A refused origin gets no CORS header at all, so the browser blocks the page.
struct CORSPolicy: Sendable {
    let configuration: CORSConfiguration
    private let origins: Set<String>
    private let patterns: [OriginPattern]
    private let allowsAnyOrigin: Bool

    init(_ configuration: CORSConfiguration) {
        self.configuration = configuration
        let listed = configuration.origins.map { $0.lowercased() }
        origins = Set(listed.filter { !$0.contains("*") })
        patterns = listed.filter { $0 != "*" && $0.contains("*") }.map(OriginPattern.init)
        allowsAnyOrigin = listed.contains("*")
    }

    private func allowedOrigin(_ request: HTTPRequest) -> String? {
        guard configuration.isEnabled, let origin = request.header("origin"), !origin.isEmpty else { return nil }
        let lower = origin.lowercased()
        guard allowsAnyOrigin || origins.contains(lower) || patterns.contains(where: { $0.matches(lower) }) else {
            return nil
        }
        return origin
    }

    /// As CouchDB's `chttpd_cors`: with `origins = *` and `credentials = true` the request's
    /// own origin is echoed with `Allow-Credentials: true`; never for the literal origin `*`.
    private func allowsCredentials(for origin: String) -> Bool {
        configuration.credentials && origin != "*"
    }

    /// The answer to a preflight request, or nil when this is not one CORS allows (it is
    /// then routed as any request, and `OPTIONS` answers 405).
    func preflight(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.method == "OPTIONS", let origin = allowedOrigin(request),
              let method = request.header("access-control-request-method"),
              configuration.methods.contains(method) else { return nil }
        let requestedHeaders = request.header("access-control-request-headers") ?? ""
        let names = requestedHeaders.split(separator: ",").map { $0.trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
        guard names.allSatisfy(configuration.headers.contains) else { return nil }
        var headers: [(name: String, value: String)] = [
            ("Access-Control-Allow-Origin", origin),
            ("Access-Control-Max-Age", String(configuration.maxAge)),
            ("Access-Control-Allow-Methods", configuration.methods.joined(separator: ", ")),
        ]
        if allowsCredentials(for: origin) { headers.append(("Access-Control-Allow-Credentials", "true")) }
        headers.append(("Access-Control-Allow-Headers", requestedHeaders))
        return HTTPResponse(status: 204, headers: headers)
    }

    /// Adds the CORS headers of a response to an allowed origin.
    func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard let origin = allowedOrigin(request) else { return }
        response.setHeader("Access-Control-Allow-Origin", origin)
        if allowsCredentials(for: origin) { response.setHeader("Access-Control-Allow-Credentials", "true") }
        // CouchDB exposes the response's simple headers (Content-Type first, as JSON is
        // not a "simple" type) and its own, which may be added later.
        let simple = ["cache-control", "content-language", "content-type", "expires", "last-modified", "pragma"]
        var exposed = ["content-type"]
        for (name, _) in response.headers {
            let lower = name.lowercased()
            if simple.contains(lower), !exposed.contains(lower) { exposed.append(lower) }
        }
        exposed += ["cache-control"].filter { !exposed.contains($0) }
        response.setHeader("Access-Control-Expose-Headers", (exposed + configuration.exposedHeaders).joined(separator: ", "))
    }
}

/// An origin with `*` wildcards (`http://localhost:*`, `https://*.example.com`): each `*`
/// stands for one run of letters, digits and `-` (a port or a host label), never for `.`, `:`
/// or `/`, so `http://localhost:*` cannot match `http://localhost.evil.example`.
struct OriginPattern: Sendable {
    private let pieces: [Substring]

    init(_ pattern: String) {
        pieces = pattern.split(separator: "*", omittingEmptySubsequences: false)
    }

    func matches(_ origin: String) -> Bool {
        Self.match(pieces[...], Substring(origin))
    }

    private static func isWildcardCharacter(_ character: Character) -> Bool {
        character.isASCII && (character.isLetter || character.isNumber || character == "-")
    }

    private static func match(_ pieces: ArraySlice<Substring>, _ text: Substring) -> Bool {
        guard let first = pieces.first else { return text.isEmpty }
        guard text.hasPrefix(first) else { return false }
        let rest = text.dropFirst(first.count)
        let remaining = pieces.dropFirst()
        if remaining.isEmpty { return rest.isEmpty }
        // A wildcard: try every non-empty run of allowed characters.
        var end = rest.startIndex
        while end < rest.endIndex, isWildcardCharacter(rest[end]) {
            end = rest.index(after: end)
            if match(remaining, rest[end...]) { return true }
        }
        return false
    }
}
