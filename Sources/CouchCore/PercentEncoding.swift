/// Percent-encoding of URL parts, as CouchDB and its replicator write them: ASCII letters and
/// digits stay, so do the marks a caller keeps, a space becomes `+` where asked, and every
/// other UTF-8 byte becomes `%XX` (upper-case hex).
public enum PercentEncoding {
    /// RFC 3986's unreserved marks, which mochiweb's `quote_plus` also keeps.
    public static let unreservedMarks = Array("-._~".utf8)
    /// The marks CouchDB's `couch_util:url_encode` keeps (in `Location` headers).
    public static let couchURLMarks = Array("_.-:".utf8)
    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    public static func encode(_ text: String, keeping marks: [UInt8] = unreservedMarks, spaceAsPlus: Bool = false) -> String {
        func isKept(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return marks.contains(byte)
            }
        }
        // Most names need nothing encoded (every `Location` of a write has one): no copy then.
        if text.utf8.allSatisfy(isKept) { return text }
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isKept(byte) {
                output.append(byte)
            } else if byte == UInt8(ascii: " "), spaceAsPlus {
                output.append(UInt8(ascii: "+"))
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0f)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// A document ID in a path, as CouchDB's `encode_doc_id`: `_design/` and `_local/`
    /// prefixes keep their slash, the rest is encoded (`/` included).
    public static func documentPath(_ id: DocumentID) -> String {
        if id.isDesign { return DocumentID.designPrefix + encode(id.nameAfterPrefix) }
        if id.isLocal { return DocumentID.localPrefix + encode(id.nameAfterPrefix) }
        return encode(id.rawValue)
    }
}

/// Percent-decoding for paths (`+` stays `+`) and query strings (`+` is a space).
public enum PercentDecoding {
    public static func decode(_ text: Substring, plusIsSpace: Bool) -> String? {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(text)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(Base16.value), let low = iterator.next().flatMap(Base16.value) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// `%XX` sequences decoded where they are valid, other bytes kept as written, and invalid
    /// UTF-8 repaired: for text that must be read whatever it holds (credentials in a peer's URL,
    /// names in a peer's answers).
    public static func decodeLeniently(_ text: Substring, plusIsSpace: Bool = false) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(text)
        }
        let input = Array(text.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(input.count)
        var index = 0
        while index < input.count {
            let byte = input[index]
            if byte == UInt8(ascii: "%"), index + 2 < input.count,
               let high = Base16.value(input[index + 1]), let low = Base16.value(input[index + 2]) {
                bytes.append(high << 4 | low)
                index += 3
                continue
            }
            bytes.append(byte == UInt8(ascii: "+") && plusIsSpace ? UInt8(ascii: " ") : byte)
            index += 1
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
