/// Values checked by the same rules as `parseValue` without building them, for `JSONCursor`:
/// a document passed on as the bytes it came in is known to be valid JSON, at the cost of one
/// scan and no allocation.
extension _JSONParser {
    /// `pos` at a value's first byte. Returns with `pos` after it.
    mutating func skipValue() throws(JSONParseError) {
        guard pos < end else { throw fail("unexpected end of input", at: pos) }
        switch bytes[pos] {
        case _quote: try skipString()
        case _openBrace: try skipContainer(closing: _closeBrace)
        case _openBracket: try skipContainer(closing: _closeBracket)
        case _minus, _zero ... _nine: try skipNumber()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        default: throw unexpected(at: pos)
        }
    }

    /// An object (`closing` is `}`: keys, colons) or an array, `pos` at its opening byte.
    mutating func skipContainer(closing: UInt8) throws(JSONParseError) {
        depth += 1
        if depth > maximumDepth { throw fail("nesting too deep", at: pos) }
        pos += 1
        skipWhitespace()
        if pos < end && bytes[pos] == closing {
            pos += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            if closing == _closeBrace {
                guard pos < end else { throw fail("unexpected end of input", at: pos) }
                guard bytes[pos] == _quote else { throw fail("expected string for object key", at: pos) }
                try skipString()
                skipWhitespace()
                guard pos < end else { throw fail("unexpected end of input", at: pos) }
                guard bytes[pos] == _colon else { throw fail("expected ':' after object key", at: pos) }
                pos += 1
                skipWhitespace()
            }
            try skipValue()
            skipWhitespace()
            guard pos < end else { throw fail("unexpected end of input", at: pos) }
            if bytes[pos] == _comma {
                pos += 1
            } else if bytes[pos] == closing {
                pos += 1
                depth -= 1
                return
            } else {
                throw fail(closing == _closeBrace ? "expected ',' or '}'" : "expected ',' or ']'", at: pos)
            }
        }
    }

    /// `pos` at the opening quote; validates UTF-8 and escapes as `parseString` does.
    mutating func skipString() throws(JSONParseError) {
        let openQuote = pos
        pos += 1
        while true {
            skipPlainBytes()
            guard pos < end else { throw fail("unterminated string", at: openQuote) }
            let b = bytes[pos]
            if b == _quote {
                pos += 1
                return
            } else if b == _backslash {
                try skipEscape()
            } else {
                try passStringByte(b)
            }
        }
    }

    /// `pos` at a backslash. A `\u` escape of a UTF-16 surrogate sets `skippedSurrogate`:
    /// `parseString` decodes a lone one to U+FFFD, so such text is not passed on as it came.
    mutating func skipEscape() throws(JSONParseError) {
        if case .unit(let unit) = try readEscape(), unit >= 0xD800 && unit <= 0xDFFF { skippedSurrogate = true }
    }

    /// Validates a number as `parseNumber` does, without making its text.
    mutating func skipNumber() throws(JSONParseError) {
        let start = pos
        if bytes[pos] == _minus {
            pos += 1
            guard pos < end else { throw fail("invalid number", at: pos) }
        }
        let first = bytes[pos]
        if first == _zero {
            pos += 1
            if pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine {
                throw fail("leading zeros are not allowed", at: start)
            }
        } else if first >= 0x31 && first <= _nine {
            pos += 1
            skipDigits()
        } else {
            throw fail("invalid number", at: pos)
        }
        if pos < end && bytes[pos] == _dot {
            pos += 1
            let digitsStart = pos
            skipDigits()
            if pos == digitsStart { throw fail("invalid number", at: pos) }
        }
        if pos < end && (bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E")) {
            pos += 1
            if pos < end && (bytes[pos] == _plus || bytes[pos] == _minus) { pos += 1 }
            let digitsStart = pos
            skipDigits()
            if pos == digitsStart { throw fail("invalid number", at: pos) }
        }
    }

    @inline(__always)
    mutating func skipDigits() {
        while pos < end && bytes[pos] >= _zero && bytes[pos] <= _nine { pos += 1 }
    }
}
