/// Reads a JSON text front to back in one pass, building only the values asked for: the others
/// are checked by the parser's rules and skipped, and their byte ranges kept. The replicator
/// reads a `_bulk_get` answer this way and sends each document on as the bytes it came in.
///
///     try JSONCursor.read(bytes) { cursor throws(JSONParseError) in
///         try cursor.enterObject()
///         while let key = try cursor.nextMember() {
///             if key == "id" { id = try cursor.readValue() } else { _ = try cursor.skipValue() }
///         }
///     }
public struct JSONCursor: ~Copyable {
    private var parser: _JSONParser
    /// Index in the caller's bytes of the parser's byte 0.
    private let base: Int
    /// Whether the container just entered has had no member or element yet.
    private var atFirst = false

    private init(parser: consuming _JSONParser, base: Int) {
        self.parser = parser
        self.base = base
    }

    /// Runs `body` with a cursor at the start of `bytes`; fails if `body` leaves anything but
    /// whitespace after the value it read.
    public static func read<Result>(_ bytes: ArraySlice<UInt8>, maximumDepth: Int = 512,
                                    _ body: (inout JSONCursor) throws(JSONParseError) -> Result) throws(JSONParseError) -> Result {
        let outcome = bytes.withUnsafeBufferPointer { buffer -> Swift.Result<Result, JSONParseError> in
            guard let start = buffer.baseAddress, buffer.count > 0 else {
                return .failure(JSONParseError(offset: 0, message: "empty input"))
            }
            var cursor = JSONCursor(parser: _JSONParser(start: start, count: buffer.count, maximumDepth: maximumDepth),
                                    base: bytes.startIndex)
            defer { cursor.parser.releaseStacks() }
            return Swift.Result { () throws(JSONParseError) -> Result in
                let result = try body(&cursor)
                cursor.parser.skipWhitespace()
                if cursor.parser.pos != cursor.parser.end {
                    throw cursor.parser.fail("trailing characters after JSON value", at: cursor.parser.pos)
                }
                return result
            }
        }
        return try outcome.get()
    }

    /// Whether a string skipped since this was last set false held a `\u` escape of a UTF-16
    /// surrogate, which reading would have decoded (a lone one to U+FFFD) rather than kept.
    public var skippedSurrogateEscape: Bool {
        get { parser.skippedSurrogate }
        set { parser.skippedSurrogate = newValue }
    }

    /// Enters the object that comes next.
    public mutating func enterObject() throws(JSONParseError) {
        try enter(_openBrace, "expected '{'")
    }

    /// Enters the array that comes next.
    public mutating func enterArray() throws(JSONParseError) {
        try enter(_openBracket, "expected '['")
    }

    /// In an object: the next member's key, the cursor then at its value, which must be read or
    /// skipped before the next call; nil once the object is closed (and left).
    public mutating func nextMember() throws(JSONParseError) -> String? {
        guard try advance(closing: _closeBrace) else { return nil }
        guard parser.pos < parser.end, parser.bytes[parser.pos] == _quote else {
            throw parser.fail("expected string for object key", at: parser.pos)
        }
        let key = try parser.parseString()
        parser.skipWhitespace()
        guard parser.pos < parser.end, parser.bytes[parser.pos] == _colon else {
            throw parser.fail("expected ':' after object key", at: parser.pos)
        }
        parser.pos += 1
        parser.skipWhitespace()
        return key
    }

    /// In an array: whether another element follows (the cursor then at it); false once the
    /// array is closed (and left).
    public mutating func nextElement() throws(JSONParseError) -> Bool {
        try advance(closing: _closeBracket)
    }

    /// Builds the value that comes next.
    public mutating func readValue() throws(JSONParseError) -> JSONValue {
        parser.skipWhitespace()
        return try parser.parseValue()
    }

    /// Checks the value that comes next and passes it; returns where it lies in the bytes read.
    public mutating func skipValue() throws(JSONParseError) -> Range<Int> {
        parser.skipWhitespace()
        let start = parser.pos
        try parser.skipValue()
        return (base + start)..<(base + parser.pos)
    }

    /// Passes the value that comes next with `pass`, given the bytes read and where the value
    /// starts in them, which returns where it ends if it took the value (having checked it as
    /// strictly as the parser), or nil to have it checked and passed as `skipValue` does.
    /// Returns where the value lies in the bytes read.
    public mutating func passValue(_ pass: (UnsafeBufferPointer<UInt8>, Int) -> Int?) throws(JSONParseError) -> Range<Int> {
        parser.skipWhitespace()
        let start = parser.pos
        if let end = pass(UnsafeBufferPointer(start: parser.bytes, count: parser.end), start) {
            parser.pos = end
        } else {
            try parser.skipValue()
        }
        return (base + start)..<(base + parser.pos)
    }

    /// Where the next value starts (after whitespace), as an index in the bytes read.
    public mutating func valueStart() -> Int {
        parser.skipWhitespace()
        return base + parser.pos
    }

    /// Where the cursor is, as an index in the bytes read: after a container left, its end.
    public var position: Int { base + parser.pos }

    private mutating func enter(_ opening: UInt8, _ message: String) throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.pos < parser.end, parser.bytes[parser.pos] == opening else {
            throw parser.pos < parser.end ? parser.fail(message, at: parser.pos) : parser.fail("unexpected end of input", at: parser.pos)
        }
        parser.depth += 1
        if parser.depth > parser.maximumDepth { throw parser.fail("nesting too deep", at: parser.pos) }
        parser.pos += 1
        atFirst = true
    }

    /// Past the separator before the next member or element; false after the closing byte.
    private mutating func advance(closing: UInt8) throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.pos < parser.end else { throw parser.fail("unexpected end of input", at: parser.pos) }
        let byte = parser.bytes[parser.pos]
        if byte == closing {
            parser.pos += 1
            parser.depth -= 1
            atFirst = false
            return false
        }
        if atFirst {
            atFirst = false
        } else {
            guard byte == _comma else {
                throw parser.fail(closing == _closeBrace ? "expected ',' or '}'" : "expected ',' or ']'", at: parser.pos)
            }
            parser.pos += 1
            parser.skipWhitespace()
        }
        return true
    }
}
