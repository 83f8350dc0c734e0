import CouchCore

/// Builds a MIME multipart body (`multipart/mixed`, `multipart/related`) as CouchDB writes them.
struct MultipartWriter {
    let boundary = Digest.randomHex(bytes: 16)
    private var output: [UInt8] = []

    func contentType(subtype: String) -> String {
        "multipart/\(subtype); boundary=\"\(boundary)\""
    }

    mutating func addPart(headers: [(String, String)], body: [UInt8]) {
        output.append(contentsOf: "--\(boundary)\r\n".utf8)
        for (name, value) in headers { output.append(contentsOf: "\(name): \(value)\r\n".utf8) }
        output.append(contentsOf: "\r\n".utf8)
        output.append(contentsOf: body)
        output.append(contentsOf: "\r\n".utf8)
    }

    mutating func finish() -> [UInt8] {
        output.append(contentsOf: "--\(boundary)--".utf8)
        return output
    }
}
