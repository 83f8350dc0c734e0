import CouchCore
import CouchTestSupport
import Foundation
import Testing

/// Every example the documentation shows in a `console` block runs here, in order, against
/// real servers, and its output is checked: a changed behaviour breaks the build, not the reader.
///
/// In a block, a line starting with `$ ` is a command (a line ending in `\` continues on the
/// next), run by one bash per page (so what a command defines stays for the next), with `COUCH`
/// (a fresh server, admin `admin`/`secret` in the URL) and `PEER` (a second one) set; the lines
/// after it, up to the next command, are what it prints. Output
/// that is JSON is compared as a pattern: every member and element shown must be there and
/// equal (`"..."` stands for any value, a string ending in `...` for any string that starts
/// with what precedes it, and an object need not show all its members); other
/// output must appear in what the command printed. A command that only reads (no `-X`, no
/// `-d`) is tried again for a few seconds until its output matches, for what happens in the
/// background (a replication). Blocks of other languages are not run.
@Suite struct DocumentationExamplesTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static var pages: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    @Test(arguments: pages)
    func examplesRunAsShown(page: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(page), encoding: .utf8)
        let examples = DocumentationExample.parse(text)
        guard !examples.isEmpty else { return }
        let couch = try ServerProcess(environment: ["COUCHETTE_ADMIN": "admin:secret"])
        let peer = try ServerProcess(environment: ["COUCHETTE_ADMIN": "admin:secret"])
        defer { _ = couch.stop(); _ = peer.stop() }
        let environment = [
            "COUCH": "http://admin:secret@127.0.0.1:\(couch.port)",
            "PEER": "http://admin:secret@127.0.0.1:\(peer.port)",
        ]
        let shell = try Shell(environment: environment)
        defer { shell.close() }
        for example in examples {
            let deadline = Date().addingTimeInterval(example.readsOnly ? 15 : 0)
            var output = ""
            repeat {
                output = try shell.run(example.command)
                if example.matches(output) { break }
                Thread.sleep(forTimeInterval: 0.25)
            } while Date() < deadline
            #expect(example.matches(output), "\(page) line \(example.line): \(example.command)\nexpected:\n\(example.expected)\ngot:\n\(output)")
        }
    }
}

/// The guide holds together: every page of docs/ is linked from the README and has a table of
/// contents, and every relative link (and its `#anchor`, as GitHub makes them from headings)
/// leads somewhere.
@Suite struct DocumentationLinksTests {
    @Test func everyPageIsReachableAndEveryLinkResolves() throws {
        let root = DocumentationExamplesTests.root
        let pages = DocumentationExamplesTests.pages
        var texts: [String: String] = [:]
        var anchors: [String: Set<String>] = [:]
        for page in pages {
            let text = Self.withoutCodeBlocks(try String(contentsOf: root.appendingPathComponent(page), encoding: .utf8))
            texts[page] = text
            anchors[page] = Set(text.split(separator: "\n").filter { $0.hasPrefix("#") }.map {
                Self.anchor(String($0.drop { $0 == "#" }))
            })
        }
        var linkedFromReadme: Set<String> = []
        for page in pages {
            let text = texts[page] ?? ""
            let directory = (page as NSString).deletingLastPathComponent
            if page != "README.md" {
                #expect(text.contains("](#"), "\(page) has no table of contents")
            }
            for target in Self.links(in: text) where !target.contains("://") {
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? page
                    : ((directory as NSString).appendingPathComponent(parts[0]) as NSString).standardizingPath
                #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(file).path),
                        "\(page) links to \(target), which does not exist")
                if page == "README.md" { linkedFromReadme.insert(file) }
                if parts.count == 2, let known = anchors[file] {
                    #expect(known.contains(parts[1]), "\(page) links to \(target): no such heading")
                }
            }
        }
        for page in pages where page != "README.md" {
            #expect(linkedFromReadme.contains(page), "README.md does not link to \(page)")
        }
    }

    /// The targets of `[text](target)` links.
    static func links(in text: String) -> [String] {
        var targets: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "](") {
            rest = rest[open.upperBound...]
            guard let close = rest.firstIndex(where: { $0 == ")" || $0 == " " }) else { break }
            targets.append(String(rest[..<close]))
        }
        return targets
    }

    /// A heading's anchor as GitHub makes it: lowercased, punctuation but `-` and `_` dropped,
    /// spaces made hyphens.
    static func anchor(_ heading: String) -> String {
        String(heading.trimmingCharacters(in: .whitespaces).lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            return character.isLetter || character.isNumber || character == "-" || character == "_" ? character : nil
        })
    }

    static func withoutCodeBlocks(_ text: String) -> String {
        var inBlock = false
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            if line.hasPrefix("```") { inBlock.toggle(); return false }
            return !inBlock
        }.joined(separator: "\n")
    }
}

/// One bash for a page's examples, as a reader runs them in one terminal: variables and
/// functions an example defines stay for the next.
final class Shell {
    private let process = ChildProcess()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = Data()
    private var count = 0

    init(environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = input
        process.standardOutput = output
        try launch(process)
    }

    /// What `command` printed on standard output (at most 60 s).
    func run(_ command: String) throws -> String {
        count += 1
        let marker = "__example_\(count)_done__"
        input.fileHandleForWriting.write(Data((command + "\necho; echo \(marker)\n").utf8))
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let range = buffer.range(of: Data(marker.utf8)) {
                let text = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                buffer.removeSubrange(..<range.upperBound)
                return text
            }
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            buffer.append(data)
        }
        throw TestServerError.unexpected("the example did not finish: \(command)")
    }

    func close() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// One `$ command` of a `console` block and the output shown after it.
struct DocumentationExample {
    let line: Int
    let command: String
    let expected: String

    var readsOnly: Bool { !command.contains(" -X") && !command.contains(" -d") && !command.contains("--data") }

    static func parse(_ markdown: String) -> [DocumentationExample] {
        var examples: [DocumentationExample] = []
        var inBlock = false
        var command: (line: Int, text: String, continues: Bool)?
        var expected: [String] = []
        func flush() {
            if let command { examples.append(DocumentationExample(line: command.line, command: command.text,
                                                                  expected: expected.joined(separator: "\n"))) }
            command = nil
            expected = []
        }
        for (number, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let text = String(line)
            if text.hasPrefix("```") {
                if inBlock { flush() }
                inBlock = !inBlock && text.trimmingCharacters(in: .whitespaces) == "```console"
                continue
            }
            guard inBlock else { continue }
            if let current = command, current.continues {
                command = (current.line, current.text + "\n" + text, text.hasSuffix("\\"))
            } else if text.hasPrefix("$ ") {
                flush()
                command = (number + 1, String(text.dropFirst(2)), text.hasSuffix("\\"))
            } else if command != nil {
                expected.append(text)
            }
        }
        return examples
    }

    func matches(_ output: String) -> Bool {
        let shown = expected.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !shown.isEmpty else { return true }
        let actual = output.trimmingCharacters(in: .whitespacesAndNewlines)
        if let pattern = try? JSONValue.parse(shown) {
            guard let value = try? JSONValue.parse(actual) else { return false }
            return Self.matches(value, pattern)
        }
        return actual.contains(shown)
    }

    static func matches(_ value: JSONValue, _ pattern: JSONValue) -> Bool {
        if pattern == "..." { return true }
        switch (value, pattern) {
        case (.string(let text), .string(let wanted)) where wanted.hasSuffix("..."):
            // "1-..." stands for a revision of generation 1, whatever its digest.
            return text.hasPrefix(wanted.dropLast(3))
        case (.object(let object), .object(let wanted)):
            return wanted.allSatisfy { member in object[member.key].map { matches($0, member.value) } ?? false }
        case (.array(let items), .array(let wanted)):
            return items.count == wanted.count && zip(items, wanted).allSatisfy { matches($0, $1) }
        default:
            return value == pattern
        }
    }
}
