/// Reads a MIME multipart body as it arrives, handing each part's headers and then its
/// bytes to a delegate, so large parts never sit in memory whole.
public final class MultipartReader {
    public protocol Delegate: AnyObject {
        func beginPart(headers: [String: String]) throws
        func partData(_ bytes: ArraySlice<UInt8>) throws
        func endPart() throws
    }

    private enum State { case preamble, headers, body, done }

    private let delimiter: [UInt8]
    private let firstDelimiter: [UInt8]
    private weak var delegate: Delegate?
    private var state = State.preamble
    private var buffer: [UInt8] = []
    /// Bytes of the current part's headers already searched for their end, so headers that
    /// arrive a byte at a time are scanned once, not once per byte.
    private var headerBytesScanned = 0
    private static let maximumHeaderBytes = 16 * 1024
    private static let headersEnd = Array("\r\n\r\n".utf8)

    /// `boundary` as given in the Content-Type's `boundary` parameter.
    public init(boundary: String, delegate: Delegate) {
        firstDelimiter = Array("--\(boundary)".utf8)
        delimiter = Array("\r\n--\(boundary)".utf8)
        self.delegate = delegate
    }

    public var isComplete: Bool { state == .done }

    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        guard state != .done else { return }
        buffer.append(contentsOf: bytes)
        try process()
    }

    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    /// The body ended; throws if the closing delimiter never came.
    public func finish() throws {
        if state != .done { throw MultipartError("multipart body ended before its closing boundary") }
    }

    private func process() throws {
        var start = 0
        defer { buffer.removeFirst(start) }
        while true {
            switch state {
            case .done:
                return
            case .preamble:
                // The first delimiter may start the body or follow a CRLF.
                guard let index = find(firstDelimiter, in: buffer, from: start) else {
                    start = max(start, buffer.count - firstDelimiter.count)
                    return
                }
                guard let after = afterDelimiter(at: index + firstDelimiter.count) else { return }
                start = after.next
                state = after.closing ? .done : .headers
            case .headers:
                // A part without headers first: searching for CRLF CRLF would find the next
                // part's delimiter when it is already buffered, and take this body for headers.
                guard buffer.count - start >= 2 else { return }
                let resume = start + max(0, headerBytesScanned - (Self.headersEnd.count - 1))
                guard let end = emptyHeaders(from: start) ?? find(Self.headersEnd, in: buffer, from: resume) else {
                    if buffer.count - start > Self.maximumHeaderBytes { throw MultipartError("multipart part headers are too long") }
                    headerBytesScanned = buffer.count - start
                    return
                }
                headerBytesScanned = 0
                let headerText = String(decoding: buffer[start..<end], as: UTF8.self)
                start = end + (end == start ? 2 : 4)
                try delegate?.beginPart(headers: Self.parseHeaders(headerText))
                state = .body
            case .body:
                if let index = find(delimiter, in: buffer, from: start) {
                    guard let after = afterDelimiter(at: index + delimiter.count) else {
                        if index > start { try delegate?.partData(buffer[start..<index]) }
                        start = index
                        return
                    }
                    if index > start { try delegate?.partData(buffer[start..<index]) }
                    try delegate?.endPart()
                    start = after.next
                    state = after.closing ? .done : .headers
                } else {
                    // Keep a tail that could be the start of a delimiter.
                    let safe = max(start, buffer.count - delimiter.count)
                    if safe > start { try delegate?.partData(buffer[start..<safe]) }
                    start = safe
                    return
                }
            }
        }
    }

    /// A part with no headers starts its body right after the delimiter's CRLF.
    private func emptyHeaders(from start: Int) -> Int? {
        buffer.count - start >= 2 && buffer[start] == 13 && buffer[start + 1] == 10 ? start : nil
    }

    /// After a delimiter: `--` closes the body, otherwise optional spaces and CRLF; nil if more bytes are needed.
    private func afterDelimiter(at position: Int) -> (next: Int, closing: Bool)? {
        guard buffer.count >= position + 2 else { return nil }
        if buffer[position] == UInt8(ascii: "-"), buffer[position + 1] == UInt8(ascii: "-") {
            return (buffer.count, true)
        }
        var index = position
        while index < buffer.count, buffer[index] == UInt8(ascii: " ") || buffer[index] == UInt8(ascii: "\t") { index += 1 }
        guard buffer.count >= index + 2 else { return nil }
        guard buffer[index] == 13, buffer[index + 1] == 10 else { return (index, false) }
        return (index + 2, false)
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard let first = needle.first, haystack.count - start >= needle.count else { return nil }
        var index = start
        let last = haystack.count - needle.count
        while index <= last {
            if haystack[index] == first {
                var matched = true
                for offset in 1..<needle.count where haystack[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }

    /// Header names in lower case.
    static func parseHeaders(_ text: String) -> [String: String] {
        var headers: [String: String] = [:]
        for line in text.split(separator: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            headers[name] = String(value)
        }
        return headers
    }

    /// The `boundary` parameter of a multipart Content-Type.
    public static func boundary(fromContentType contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters() == "boundary" else { continue }
            var value = pair[1].trimmingCharacters()
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            return value.isEmpty ? nil : value
        }
        return nil
    }
}

public struct MultipartError: Error, Sendable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
}

extension Substring {
    func trimmingCharacters() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
