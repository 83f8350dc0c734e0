import CRegex

/// A compiled `$regex` pattern. CouchDB runs PCRE (`re:run`, an unanchored search), whose
/// backtracking lets a pattern such as `^(a|aa)+$` take minutes on a short string; this is
/// RE2, whose matching time is linear in the string whatever the pattern. RE2 has PCRE's
/// syntax but for what needs backtracking (backreferences, lookaround, possessive and atomic
/// forms) and a few escapes (`\Z`, `\h`, `\R`): such patterns are refused as invalid.
public final class MangoRegex: @unchecked Sendable {  // a compiled RE2 is immutable and safe to share between threads
    let pattern: String
    private let compiled: OpaquePointer

    public init?(_ pattern: String) {
        let translated = Self.translatingGroupNames(pattern)
        guard let compiled = translated.utf8.withContiguousStorageIfAvailable({ bytes in
            bytes.withMemoryRebound(to: CChar.self) { couchette_regex_compile($0.baseAddress, $0.count) }
        }) ?? Array(translated.utf8).withUnsafeBufferPointer({ bytes in
            bytes.withMemoryRebound(to: CChar.self) { couchette_regex_compile($0.baseAddress, $0.count) }
        }) else { return nil }
        self.pattern = pattern
        self.compiled = compiled
    }

    deinit { couchette_regex_free(compiled) }

    public func matches(_ string: String) -> Bool {
        var string = string
        return string.withUTF8 { bytes in
            bytes.withMemoryRebound(to: CChar.self) { couchette_regex_search(compiled, $0.baseAddress, $0.count) == 1 }
        }
    }

    /// PCRE's `(?<name>...)` as this RE2 spells a named group, `(?P<name>...)`; `(?<=` and
    /// `(?<!` (lookbehind) are left for RE2 to refuse. Escapes and character classes are
    /// skipped, so `\(?<` and `[(?<]` stay as written.
    static func translatingGroupNames(_ pattern: String) -> String {
        let bytes = Array(pattern.utf8)
        guard bytes.count >= 4, pattern.contains("(?<") else { return pattern }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 4)
        var index = 0
        var inClass = false
        while index < bytes.count {
            let byte = bytes[index]
            output.append(byte)
            index += 1
            switch byte {
            case UInt8(ascii: "\\"):
                if index < bytes.count {
                    output.append(bytes[index])
                    index += 1
                }
            case UInt8(ascii: "[") where !inClass:
                inClass = true
                // A `]` first in the class (after an optional `^`) is a member, not its end.
                if index < bytes.count, bytes[index] == UInt8(ascii: "^") {
                    output.append(bytes[index])
                    index += 1
                }
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    output.append(bytes[index])
                    index += 1
                }
            case UInt8(ascii: "]") where inClass:
                inClass = false
            case UInt8(ascii: "(") where !inClass:
                if index + 2 < bytes.count, bytes[index] == UInt8(ascii: "?"), bytes[index + 1] == UInt8(ascii: "<"),
                   bytes[index + 2] != UInt8(ascii: "="), bytes[index + 2] != UInt8(ascii: "!") {
                    output.append(contentsOf: "?P<".utf8)
                    index += 2
                }
            default:
                break
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
