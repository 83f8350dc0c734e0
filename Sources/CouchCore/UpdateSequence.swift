/// A position in a database's change history. Couchette counts changes with an integer;
/// it writes them as CouchDB 3 does, as an opaque string `"<number>-<opaque>"` (`seq`,
/// `last_seq`, `update_seq`, `purge_seq`, checkpoints), and reads back every form a client
/// may send as `since`: such a string, a bare number, or a CouchDB 3 cluster's string.
///
/// The opaque part is what a single-shard CouchDB 3 database would write: the URL-safe
/// base64 of the Erlang term `[{Node, [0, 4294967295], {Number, <<>>, Node}}]`. Couchette
/// reads only the leading number.
public struct UpdateSequence: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let number: Int

    public init(_ number: Int) { self.number = number }

    public static func < (lhs: UpdateSequence, rhs: UpdateSequence) -> Bool { lhs.number < rhs.number }

    /// CouchDB 3's text: `"12-g2wAAAAB..."`.
    public var description: String {
        var output: [UInt8] = []
        appendText(to: &output)
        return String(decoding: output, as: UTF8.self)
    }

    public var json: JSONValue { .string(description) }

    /// Appends the sequence as a JSON string (the `_changes` hot path: no intermediate strings).
    public func appendJSON(to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        appendText(to: &output)
        output.append(UInt8(ascii: "\""))
    }

    /// The term around the number, which alone varies, split where base64 can encode it once:
    /// the whole 3-byte groups before the number, encoded in advance (`encodedHead`), then the
    /// 0–2 bytes left over (`carry`), encoded with the number and the bytes after it (`tail`).
    /// Of the tail, only the 0–2 bytes that complete the number's last 3-byte group are encoded
    /// with it; the rest is encoded in advance for each of those three places it may start at.
    private static let encodedHead: [UInt8] = termParts.encodedHead
    private static let carry: [UInt8] = termParts.carry
    private static let tail: [UInt8] = termParts.tail
    private static let encodedTails: [[UInt8]] = (0..<3).map { skipped in
        var encoded: [UInt8] = []
        appendBase64URL(Array(termParts.tail[skipped...]), to: &encoded)
        return encoded
    }

    private static let termParts: (encodedHead: [UInt8], carry: [UInt8], tail: [UInt8]) = {
        var head = ExternalTermWriter()
        head.listHeader(1)
        head.tupleHeader(3)
        head.atom("nonode@nohost")
        head.listHeader(2)
        head.integer(0)
        head.integer(4_294_967_295)
        head.endList()
        head.tupleHeader(3)
        var tail = ExternalTermWriter(fragment: true)
        tail.binary([UInt8]())
        tail.atom("nonode@nohost")
        tail.endList()
        let aligned = head.bytes.count - head.bytes.count % 3
        var encoded: [UInt8] = []
        appendBase64URL(Array(head.bytes[..<aligned]), to: &encoded)
        return (encoded, Array(head.bytes[aligned...]), tail.bytes)
    }()

    private func appendText(to output: inout [UInt8]) {
        JSONWriter.appendInteger(number, to: &output)
        output.append(UInt8(ascii: "-"))
        output.append(contentsOf: Self.encodedHead)
        guard number >= 0, number <= Int(Int32.max) else {
            var term = ExternalTermWriter(fragment: true)
            term.appendRaw(Self.carry[...])
            term.integer(number)
            term.appendRaw(Self.tail[...])
            return Self.appendBase64URL(term.bytes, to: &output)
        }
        // The term's varying part on the stack (a feed writes one for every row), its number
        // as `ExternalTermWriter.integer` writes one of 32 bits (`SMALL_INTEGER_EXT`, `INTEGER_EXT`).
        let (carry, tail) = (Self.carry, Self.tail)
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: carry.count + 5 + 2) { term in
            var count = 0
            func put(_ byte: UInt8) {
                term[count] = byte
                count += 1
            }
            carry.forEach(put)
            if number <= 255 {
                put(97)
                put(UInt8(number))
            } else {
                put(98)
                for shift in stride(from: 24, through: 0, by: -8) { put(UInt8(truncatingIfNeeded: number >> shift)) }
            }
            let completing = (3 - count % 3) % 3
            tail[..<completing].forEach(put)
            Self.appendBase64URL(UnsafeBufferPointer(rebasing: term[..<count]), to: &output)
            output.append(contentsOf: Self.encodedTails[completing])
        }
    }

    /// The number of a sequence as a client sends it back: `12`, `"12"`, `12-g1AAAA...` or
    /// `"12-g1AAAA..."` (with the quotes of its JSON form); nil when there is no leading number.
    public init?(parsing raw: String) {
        var text = Substring(raw)
        if text.count >= 2, text.first == "\"", text.last == "\"" { text = text.dropFirst().dropLast() }
        let digits = text.utf8.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard !digits.isEmpty, let value = Int(Substring(digits)) else { return nil }  // nil past Int.max
        let rest = text.utf8.dropFirst(digits.count)
        guard rest.isEmpty || rest.first == UInt8(ascii: "-") else { return nil }
        self.init(value)
    }

    /// The number of a sequence in a JSON document (a checkpoint, a request body).
    public init?(json: JSONValue) {
        switch json {
        case .number(let number):
            guard let value = number.intValue, value >= 0 else { return nil }
            self.init(value)
        case .string(let text): self.init(parsing: text)
        default: return nil
        }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// RFC 4648 §5 without padding, as CouchDB's `couch_util:encodeBase64Url`.
    static func appendBase64URL(_ bytes: [UInt8], to output: inout [UInt8]) {
        bytes.withUnsafeBufferPointer { appendBase64URL($0, to: &output) }
    }

    static func appendBase64URL(_ bytes: UnsafeBufferPointer<UInt8>, to output: inout [UInt8]) {
        // Encoded on the stack and appended at once: a feed writes one for every row.
        let count = bytes.count / 3 * 4 + (bytes.count % 3 == 0 ? 0 : bytes.count % 3 + 1)
        alphabet.withUnsafeBufferPointer { alphabet in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { encoded in
                var index = 0, position = 0
                func emit(_ chunk: UInt32, _ digits: Int) {
                    for digit in 0..<digits {
                        encoded[position] = alphabet[Int(chunk >> (18 - 6 * UInt32(digit)) & 63)]
                        position += 1
                    }
                }
                while index + 2 < bytes.count {
                    emit(UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2]), 4)
                    index += 3
                }
                switch bytes.count - index {
                case 1: emit(UInt32(bytes[index]) << 16, 2)
                case 2: emit(UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8, 3)
                default: break
                }
                output.append(contentsOf: encoded)
            }
        }
    }
}
