import CouchCore

/// A response object of a show, list or update function (`{code, json|body|base64,
/// headers}`) as CouchDB's `chttpd_external` reads it: members apply in order, an unknown
/// member is a 500 `external_response_error`, and the content type defaults to the last
/// body's kind (`text/html; charset=utf-8` for `body`, `application/binary` for `base64`,
/// `application/json` otherwise).
struct FunctionResponse {
    var code = 200
    var headers: [(name: String, value: String)] = []
    var contentType = "application/json"
    var data: [UInt8] = []
    var json: JSONValue?

    init(_ object: JSONValue) throws(CouchError) {
        guard case .object(let members) = object else {
            throw CouchError.named("external_response_error", "Invalid data from external server: \(object.serializedString())")
        }
        for (key, value) in members {
            switch key {
            case "":
                continue
            case "code":
                // Statuses the listener can send with a body.
                guard let number = value.doubleValue, number == number.rounded(), number >= 200, number < 600 else {
                    throw Self.invalid(key, value)
                }
                code = Int(number)
            case "stop":
                continue
            case "json":
                json = value
                contentType = "application/json"
            case "body":
                guard let text = value.stringValue else { throw Self.invalid(key, value) }
                data = Array(text.utf8)
                contentType = "text/html; charset=utf-8"
            case "base64":
                guard let text = value.stringValue, let bytes = Base64.decode(text) else { throw Self.invalid(key, value) }
                data = bytes
                contentType = "application/binary"
            case "headers":
                guard case .object(let fields) = value else { throw Self.invalid(key, value) }
                headers = fields.map { (name: $0.key, value: $0.value.stringValue ?? $0.value.serializedString()) }
            default:
                throw Self.invalid(key, value)
            }
        }
    }

    private static func invalid(_ key: String, _ value: JSONValue) -> CouchError {
        CouchError.named("external_response_error",
                         "Invalid data from external server: {<<\"\(key)\">>,\(value.serializedString())}")
    }

    /// Replaces (or adds) a header, whatever the case the function wrote it in.
    mutating func setHeader(_ name: String, _ value: String) {
        headers.removeAll { $0.name.lowercased() == name.lowercased() }
        headers.append((name, value))
    }

    /// Headers that frame the message: the listener writes them, a function may not.
    static let framingHeaders: Set<String> = ["content-length", "transfer-encoding", "connection"]

    /// The HTTP response: the function's headers, `Content-Type` when it set none.
    var response: HTTPResponse {
        var headers = self.headers.filter { !Self.framingHeaders.contains($0.name.lowercased()) }
        if !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
            headers.insert(("Content-Type", contentType), at: 0)
        }
        if let json {
            var bytes = json.serialized()
            bytes.append(UInt8(ascii: "\n"))
            return HTTPResponse(status: code, headers: headers, body: .bytes(bytes))
        }
        return HTTPResponse(status: code, headers: headers, body: .bytes(data))
    }
}
