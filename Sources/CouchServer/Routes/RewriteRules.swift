import CouchCore

/// A design document's `rewrites` array, matched as CouchDB's `chttpd_rewrite` matches it:
/// the first rule whose `method` (default `*`) and `from` pattern fit the path after
/// `_rewrite` wins; `:name` segments bind, a trailing `*` takes the rest of the path;
/// `to` and `query` are filled from the bindings and the request's own query parameters,
/// which are passed on. Pure: no I/O, no server.
struct RewriteRules {
    enum Segment: Equatable {
        case literal(String)
        case variable(String)
        /// `*`: the rest of the path (only as the last segment; elsewhere it binds one segment).
        case rest
    }

    struct Rule {
        var method: String?
        var from: [Segment]
        var to: [Segment]
        var query: JSONObject
        var formats: JSONObject
    }

    /// Query parameters CouchDB reads and writes as JSON.
    static let jsonParameters: Set<String> = ["key", "startkey", "start_key", "endkey", "end_key", "keys"]

    let rules: [Rule]

    /// Every rule is read first: one without `to` (or climbing above the database when
    /// `secure`) fails the request, as in CouchDB. Entries that are not objects are skipped.
    init(_ json: [JSONValue], secure: Bool) throws(CouchError) {
        var rules: [Rule] = []
        for case .object(let rule) in json {
            let method = rule["method"].map { $0.stringValue ?? $0.serializedString() }
            let from = try rule["from"].map { value throws(CouchError) in try Self.parse(value, secure: secure) } ?? [.rest]
            guard let toValue = rule["to"] else { throw CouchError.named("error", "invalid_rewrite_target") }
            let to = try Self.parse(toValue, secure: secure)
            rules.append(Rule(method: method == "*" ? nil : method, from: from, to: to,
                              query: rule["query"]?.objectValue ?? JSONObject(),
                              formats: rule["formats"]?.objectValue ?? JSONObject()))
        }
        self.rules = rules
    }

    private static func parse(_ value: JSONValue, secure: Bool) throws(CouchError) -> [Segment] {
        guard let path = value.stringValue else { throw CouchError.named("error", "invalid_rewrite_target") }
        var segments: [Segment] = []
        var climbs = 0
        for part in path.split(separator: "/") {
            switch part {
            case "*":
                segments.append(.rest)
            case "..":
                if climbs == 2 && secure {
                    throw CouchError.named("insecure_rewrite_rule", "too many ../.. segments")
                }
                climbs += 1
                segments.append(.literal(".."))
            case _ where part.hasPrefix(":"):
                segments.append(.variable(String(part.dropFirst())))
            default:
                segments.append(.literal(String(part)))
            }
        }
        return segments
    }

    /// The rewritten path relative to the design document, with its query string; nil when
    /// no rule matches.
    func target(method: String, path: [String], query: [(String, JSONValue)]) throws(CouchError) -> String? {
        for rule in rules where rule.method == nil || rule.method == method {
            guard let (remaining, pathBindings) = Self.bind(rule.from, to: path) else { continue }
            // Path bindings (latest first, as CouchDB lists them), then the request's parameters.
            let bindings: [(String, JSONValue)] = pathBindings.reversed().map { ($0.0, JSONValue($0.1)) } + query
            var ruleQuery: [(String, JSONValue)] = []
            for (key, value) in rule.query {
                ruleQuery.append((key, Self.substitute(value, bindings: bindings, formats: rule.formats)))
            }
            let ruleKeys = Set(ruleQuery.map(\.0))
            let passed = bindings.filter { !ruleKeys.contains($0.0) }
            let final = passed + ruleQuery.reversed()
            var parts: [String] = []
            for segment in rule.to {
                switch segment {
                case .rest:
                    parts += remaining
                case .variable(let name):
                    parts.append(final.first { $0.0 == name }.map { Self.text($0.1) } ?? "undefined")
                case .literal(let text):
                    parts.append(text)
                }
                if segment == .rest { break }
            }
            var target = parts.map { PercentEncoding.encode($0, spaceAsPlus: true) }.joined(separator: "/")
            let encoded = final.reversed().filter { $0.0 != "*" }.map { key, value in
                let text = Self.jsonParameters.contains(key) ? value.serializedString() : Self.text(value)
                return PercentEncoding.encode(key, spaceAsPlus: true) + "=" + PercentEncoding.encode(text, spaceAsPlus: true)
            }
            if !encoded.isEmpty { target += "?" + encoded.joined(separator: "&") }
            return target
        }
        return nil
    }

    /// Matches `pattern` against the path: what `*` left over, and the bindings in path order.
    private static func bind(_ pattern: [Segment], to path: [String]) -> ([String], [(String, String)])? {
        var bindings: [(String, String)] = []
        var index = 0
        for (position, segment) in pattern.enumerated() {
            if segment == .rest, position == pattern.count - 1 { return (Array(path[index...]), bindings) }
            guard index < path.count else { return nil }
            switch segment {
            case .variable(let name): bindings.append((name, path[index]))
            case .rest: bindings.append(("*", path[index]))
            case .literal(let text): if text != path[index] { return nil }
            }
            index += 1
        }
        return index == path.count ? ([], bindings) : nil
    }

    /// A rule's query value with `:name` (and `*`) replaced by their bindings, formatted by
    /// `formats` (`int`, `bool`); arrays are substituted member by member.
    private static func substitute(_ value: JSONValue, bindings: [(String, JSONValue)], formats: JSONObject) -> JSONValue {
        func variable(_ name: String, default fallback: JSONValue) -> JSONValue {
            let bound = bindings.first { $0.0 == name }?.1 ?? fallback
            switch formats[name]?.stringValue {
            case "int"?:
                if let text = bound.stringValue, let number = Int(text) { return JSONValue(number) }
            case "bool"?:
                if let text = bound.stringValue?.lowercased(), text == "true" || text == "false" { return JSONValue(text == "true") }
            default:
                break
            }
            return bound
        }
        switch value {
        case .string(let text) where text == "*":
            return variable("*", default: value)
        case .string(let text) where text.hasPrefix(":"):
            return variable(String(text.dropFirst()), default: value)
        case .array(let items):
            return .array(items.map { item in
                if let text = item.stringValue, text.hasPrefix(":") { return variable(String(text.dropFirst()), default: item) }
                return item
            })
        default:
            return value
        }
    }

    private static func text(_ value: JSONValue) -> String { value.stringValue ?? value.serializedString() }

    /// Resolves `.` and `..` and empty segments, as CouchDB normalises a rewritten path.
    static func normalize(_ path: String) -> String {
        var segments: [Substring] = []
        for part in path.split(separator: "/") {
            switch part {
            case ".": continue
            case "..":
                if let last = segments.last, last != ".." { segments.removeLast() } else { segments.append(part) }
            default: segments.append(part)
            }
        }
        return "/" + segments.joined(separator: "/")
    }
}
