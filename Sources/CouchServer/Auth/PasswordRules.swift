import CouchCore

/// `[chttpd_auth] password_regexp`: the patterns every new password of a user document must
/// match, written as CouchDB reads them, an Erlang list of strings or `{Pattern}` /
/// `{Pattern, Reason}` tuples, e.g. `[{".{10,}", "At least 10 characters."}, "\\d+"]`.
/// A password that misses one is refused with 400 and the first missed pattern's reason; a
/// value that is not such a list refuses every new password with 403, as CouchDB does
/// (the setting is accepted, the server just cannot hash passwords until it is fixed).
/// Patterns run on RE2 (linear time), an unanchored search as Erlang's `re:run`.
struct PasswordRules: Sendable {
    struct Rule: Sendable {
        let pattern: MangoRegex
        let reason: String?
    }

    static let requirementError = "Password does not conform to requirements."
    static let serverError = CouchError(.forbidden, "Server cannot hash passwords at this time.")

    private var rules: [Rule]? = []

    init() {}

    init(_ text: String) {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty, trimmed != "[]" else { return }
        var reader = ErlangTermReader(trimmed)
        rules = reader.rules()
    }

    /// Throws CouchDB's refusal when `password` misses a rule, or when the rules are unreadable.
    func check(_ password: String) throws(CouchError) {
        guard let rules else { throw Self.serverError }
        for rule in rules where !rule.pattern.matches(password) {
            throw CouchError.badRequest(rule.reason.map { Self.requirementError + " " + $0 } ?? Self.requirementError)
        }
    }
}

/// Just enough of Erlang's term syntax for `password_regexp`: a list of strings and tuples of
/// strings, with Erlang's string escapes.
private struct ErlangTermReader {
    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ text: String) { scalars = Array(text.unicodeScalars) }

    /// nil when the text is not a list of `"Pattern"`, `{"Pattern"}` or `{"Pattern", "Reason"}`
    /// with valid patterns.
    mutating func rules() -> [PasswordRules.Rule]? {
        guard consume("[") else { return nil }
        var rules: [PasswordRules.Rule] = []
        skipBlanks()
        if consume("]") { return end() ? rules : nil }
        repeat {
            skipBlanks()
            var parts: [String] = []
            if consume("{") {
                repeat {
                    skipBlanks()
                    guard let part = string() else { return nil }
                    parts.append(part)
                    skipBlanks()
                } while consume(",")
                guard consume("}"), (1...2).contains(parts.count) else { return nil }
            } else {
                guard let part = string() else { return nil }
                parts = [part]
            }
            guard let pattern = MangoRegex(parts[0]) else { return nil }
            // CouchDB adds a reason only when it is a non-empty string.
            rules.append(PasswordRules.Rule(pattern: pattern, reason: parts.count == 2 && !parts[1].isEmpty ? parts[1] : nil))
            skipBlanks()
        } while consume(",")
        guard consume("]") else { return nil }
        return end() ? rules : nil
    }

    private mutating func end() -> Bool {
        skipBlanks()
        return index == scalars.count
    }

    private mutating func consume(_ character: Unicode.Scalar) -> Bool {
        guard index < scalars.count, scalars[index] == character else { return false }
        index += 1
        return true
    }

    private mutating func skipBlanks() {
        while index < scalars.count, scalars[index].properties.isWhitespace { index += 1 }
    }

    /// A double-quoted Erlang string: `\\`, `\"`, `\n`, `\t`, `\s` (space), `\d` (delete)...;
    /// an unknown escape stands for its character, as in Erlang.
    private mutating func string() -> String? {
        guard consume("\"") else { return nil }
        var result = String.UnicodeScalarView()
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            switch scalar {
            case "\"":
                return String(result)
            case "\\":
                guard index < scalars.count else { return nil }
                let escaped = scalars[index]
                index += 1
                let replacements: [Unicode.Scalar: Unicode.Scalar] = [
                    "n": "\n", "t": "\t", "r": "\r", "s": " ", "d": "\u{7f}", "e": "\u{1b}", "f": "\u{0c}",
                    "v": "\u{0b}", "b": "\u{08}",
                ]
                result.append(replacements[escaped] ?? escaped)
            default:
                result.append(scalar)
            }
        }
        return nil
    }
}
