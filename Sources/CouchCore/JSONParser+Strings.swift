/// Strings: the fast path for runs without escapes (checked eight bytes at a time),
/// UTF-8 validation, escapes and surrogate pairs.
extension _JSONParser {
    /// `pos` is at the opening quote. Returns with `pos` after the closing quote.
    mutating func parseString() throws(JSONParseError) -> String {
        let openQuote = pos
        pos += 1
        let start = pos
        // Fast scan: no escapes, no control characters.
        while true {
            skipPlainBytes()
            guard pos < end else { throw fail("unterminated string", at: openQuote) }
            let b = bytes[pos]
            if b == _quote {
                let s = String(decoding: UnsafeBufferPointer(start: bytes + start, count: pos - start), as: UTF8.self)
                pos += 1
                return s
            } else if b == _backslash {
                return try parseEscapedString(openQuote: openQuote, start: start)
            } else {
                try passStringByte(b)
            }
        }
    }

    /// Advances over the bytes of a string that need no attention (ASCII other than control
    /// characters, `"` and `\`), eight at a time.
    @inline(__always)
    mutating func skipPlainBytes() {
        while pos + 8 <= end {
            let x = UnsafeRawPointer(bytes + pos).loadUnaligned(as: UInt64.self)
            let special = _swarLessOrHigh(x, 0x20)
                | _swarHasZero(x ^ (_ones &* UInt64(_quote)))
                | _swarHasZero(x ^ (_ones &* UInt64(_backslash)))
            if special != 0 { return }
            pos += 8
        }
    }

    /// Passes the byte at `pos` of a string, neither `"` nor `\`: a control character is
    /// refused, a multi-byte sequence validated.
    @inline(__always)
    mutating func passStringByte(_ b: UInt8) throws(JSONParseError) {
        if b < 0x20 {
            throw fail("unescaped control character in string", at: pos)
        } else if b < 0x80 {
            pos += 1
        } else {
            try validateUTF8Sequence()
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `pos` (lead byte >= 0x80) and advances past it.
    @inline(__always)
    mutating func validateUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[pos]
        let length: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF  // allowed range of the second byte
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; hi = 0x9F  // excludes UTF-8 encoded surrogates
        case 0xF0: length = 4; lo = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; hi = 0x8F
        default: throw fail("invalid UTF-8", at: pos)
        }
        guard pos + length <= end else { throw fail("invalid UTF-8", at: pos) }
        let second = bytes[pos + 1]
        guard second >= lo && second <= hi else { throw fail("invalid UTF-8", at: pos) }
        var i = 2
        while i < length {
            let c = bytes[pos + i]
            guard c & 0xC0 == 0x80 else { throw fail("invalid UTF-8", at: pos) }
            i += 1
        }
        pos += length
    }

    /// Slow path: the string at `start` has at least one escape, at `pos`.
    mutating func parseEscapedString(openQuote: Int, start: Int) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + start, count: pos - start))
        var runStart = pos
        while true {
            guard pos < end else { throw fail("unterminated string", at: openQuote) }
            let b = bytes[pos]
            if b == _quote {
                scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + runStart, count: pos - runStart))
                pos += 1
                return String(decoding: scratch, as: UTF8.self)
            } else if b == _backslash {
                scratch.append(contentsOf: UnsafeBufferPointer(start: bytes + runStart, count: pos - runStart))
                try parseEscape()
                runStart = pos
            } else {
                try passStringByte(b)
            }
        }
    }

    /// What one escape stands for: a byte, or the UTF-16 unit of a `\u` escape.
    enum Escape {
        case byte(UInt8)
        case unit(UInt16)
    }

    /// `pos` at a backslash: checks the escape and advances past it.
    mutating func readEscape() throws(JSONParseError) -> Escape {
        let escapeStart = pos
        guard pos + 1 < end else { throw fail("unterminated string", at: pos) }
        let c = bytes[pos + 1]
        pos += 2
        switch c {
        case _quote: return .byte(_quote)
        case _backslash: return .byte(_backslash)
        case _slash: return .byte(_slash)
        case UInt8(ascii: "b"): return .byte(0x08)
        case UInt8(ascii: "f"): return .byte(0x0C)
        case UInt8(ascii: "n"): return .byte(0x0A)
        case UInt8(ascii: "r"): return .byte(0x0D)
        case UInt8(ascii: "t"): return .byte(0x09)
        case UInt8(ascii: "u"): return .unit(try parseHex4(escapeStart: escapeStart))
        default: throw fail("invalid escape", at: escapeStart)
        }
    }

    /// `pos` at a backslash. Appends the decoded character to `scratch`.
    mutating func parseEscape() throws(JSONParseError) {
        let unit: UInt16
        switch try readEscape() {
        case .byte(let byte):
            scratch.append(byte)
            return
        case .unit(let value):
            unit = value
        }
        var scalar: UInt32 = 0xFFFD
        if unit >= 0xD800 && unit <= 0xDBFF {
            // High surrogate: needs a following \uDC00-\uDFFF, otherwise U+FFFD.
            if pos + 1 < end && bytes[pos] == _backslash && bytes[pos + 1] == UInt8(ascii: "u") {
                let save = pos
                pos += 2
                let low = try parseHex4(escapeStart: save)
                if low >= 0xDC00 && low <= 0xDFFF {
                    scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else {
                    pos = save  // not a pair: leave the second escape to be decoded on its own
                }
            }
        } else if unit >= 0xDC00 && unit <= 0xDFFF {
            scalar = 0xFFFD  // lone low surrogate
        } else {
            scalar = UInt32(unit)
        }
        appendUTF8(scalar)
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        guard pos + 4 <= end else { throw fail("invalid \\u escape", at: escapeStart) }
        var v: UInt16 = 0
        for i in 0..<4 {
            let h = bytes[pos + i]
            let d: UInt8
            switch h {
            case _zero ... _nine: d = h - _zero
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = h - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = h - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape", at: escapeStart)
            }
            v = v << 4 | UInt16(d)
        }
        pos += 4
        return v
    }

    @inline(__always)
    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }
}
