/// Standard base64 (RFC 4648, with padding), for attachment `data` and digests.
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    public static func encode<Bytes: Collection>(_ input: Bytes, into output: inout [UInt8]) where Bytes.Element == UInt8 {
        output.reserveCapacity(output.count + (input.count + 2) / 3 * 4)
        var iterator = input.makeIterator()
        while let first = iterator.next() {
            let second = iterator.next()
            let third = iterator.next()
            let value = UInt32(first) << 16 | UInt32(second ?? 0) << 8 | UInt32(third ?? 0)
            output.append(alphabet[Int(value >> 18 & 63)])
            output.append(alphabet[Int(value >> 12 & 63)])
            output.append(second == nil ? UInt8(ascii: "=") : alphabet[Int(value >> 6 & 63)])
            output.append(third == nil ? UInt8(ascii: "=") : alphabet[Int(value & 63)])
        }
    }

    public static func encode<Bytes: Collection>(_ input: Bytes) -> String where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        encode(input, into: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes padded or unpadded base64, ignoring whitespace; nil if malformed.
    public static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count / 4 * 3)
        var quantum: UInt32 = 0
        var count = 0
        var padding = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                continue
            case UInt8(ascii: "="):
                padding += 1
                continue
            default:
                guard padding == 0 else { return nil }
                let value = decodeTable[Int(byte)]
                guard value != 0xff else { return nil }
                quantum = quantum << 6 | UInt32(value)
                count += 1
                if count == 4 {
                    output.append(UInt8(quantum >> 16 & 0xff))
                    output.append(UInt8(quantum >> 8 & 0xff))
                    output.append(UInt8(quantum & 0xff))
                    quantum = 0
                    count = 0
                }
            }
        }
        switch count {
        case 0: guard padding == 0 else { return nil }
        case 2:
            guard padding == 0 || padding == 2 else { return nil }
            output.append(UInt8(quantum >> 4 & 0xff))
        case 3:
            guard padding == 0 || padding == 1 else { return nil }
            output.append(UInt8(quantum >> 10 & 0xff))
            output.append(UInt8(quantum >> 2 & 0xff))
        default:
            return nil
        }
        return output
    }
}
