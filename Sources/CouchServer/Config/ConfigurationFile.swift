/// An ini file as CouchDB's `local.ini`: `[section]` headers, `key = value` lines,
/// `;` comments, lines ended by LF, CRLF or CR. Keeps sections and keys in file order.
/// Needs nothing but the standard library (the `config` fuzz target compiles it alone).
public struct ConfigurationFile: Sendable {
    public struct Entry: Sendable, Equatable {
        public let section: String
        public let key: String
        public let value: String

        public init(section: String, key: String, value: String) {
            self.section = section
            self.key = key
            self.value = value
        }
    }

    public private(set) var entries: [Entry] = []

    /// Throws at the first line that is neither a section, a `key = value` nor a comment.
    public init(text: String) throws(ConfigurationError) {
        let (entries, problems) = Self.parse(text)
        if let problem = problems.first { throw problem }
        self.entries = entries
    }

    /// The entries of the lines it can read, and what is wrong with the others.
    public static func lenient(text: String) -> (file: ConfigurationFile, problems: [ConfigurationError]) {
        let (entries, problems) = parse(text)
        return (ConfigurationFile(entries: entries), problems)
    }

    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// Read by Unicode scalars, not characters: a combining mark after `[` or `=` must not
    /// hide it (`"[\u{301}x]"` is a section).
    private static func parse(_ text: String) -> ([Entry], [ConfigurationError]) {
        var entries: [Entry] = []
        var problems: [ConfigurationError] = []
        var section = ""
        let scalars = text.unicodeScalars
        var lineStart = scalars.startIndex
        var number = 0
        while lineStart < scalars.endIndex || number == 0 {
            number += 1
            let lineEnd = scalars[lineStart...].firstIndex { $0 == "\n" || $0 == "\r" } ?? scalars.endIndex
            let line = withoutInlineComment(trimmed(scalars[lineStart..<lineEnd]))
            if lineEnd == scalars.endIndex {
                lineStart = lineEnd
            } else {
                let next = scalars.index(after: lineEnd)
                lineStart = scalars[lineEnd] == "\r" && next < scalars.endIndex && scalars[next] == "\n" ? scalars.index(after: next) : next
            }
            guard let first = line.first, first != ";", first != "#" else { continue }
            if first == "[" {
                guard line.count >= 2, line.last == "]" else {
                    problems.append(ConfigurationError("line \(number): unterminated section header"))
                    continue
                }
                section = String(String.UnicodeScalarView(trimmed(line.dropFirst().dropLast())))
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                problems.append(ConfigurationError("line \(number): expected key = value"))
                continue
            }
            let key = String(String.UnicodeScalarView(trimmed(line[..<equals])))
            let value = String(String.UnicodeScalarView(trimmed(line[line.index(after: equals)...])))
            guard !key.isEmpty else {
                problems.append(ConfigurationError("line \(number): empty key"))
                continue
            }
            entries.append(Entry(section: section, key: key, value: value))
        }
        return (entries, problems)
    }

    /// The line up to an in-line comment, which starts with a `;` after a space or tab, as
    /// CouchDB's `config:remove_comments` reads it (`max_dbs_open = 500 ; a comment`).
    private static func withoutInlineComment(_ line: Substring.UnicodeScalarView) -> Substring.UnicodeScalarView {
        var previous: Unicode.Scalar?
        for index in line.indices {
            if line[index] == ";", previous == " " || previous == "\t" {
                return trimmed(line[line.startIndex..<index])
            }
            previous = line[index]
        }
        return line
    }

    private static func trimmed(_ scalars: Substring.UnicodeScalarView) -> Substring.UnicodeScalarView {
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let end = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return scalars[scalars.startIndex..<scalars.startIndex] }
        return scalars[start...end]
    }

    /// The entries as ini text, each section once (where it first appears), its keys in order.
    public var text: String {
        var sections: [String] = []
        var seen: Set<String> = []
        for entry in entries where seen.insert(entry.section).inserted { sections.append(entry.section) }
        var text = ""
        for section in sections {
            text += "\n[\(section)]\n"
            for entry in entries where entry.section == section { text += "\(entry.key) = \(entry.value)\n" }
        }
        return text
    }

    /// The last value of `key` in any of `sections` (CouchDB reads `[chttpd_auth]` and its
    /// older name `[couch_httpd_auth]` alike).
    public func value(_ key: String, in sections: String...) -> String? {
        entries.last { sections.contains($0.section) && $0.key == key }?.value
    }

    public func entries(in section: String) -> [Entry] {
        entries.filter { $0.section == section }
    }
}

public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
