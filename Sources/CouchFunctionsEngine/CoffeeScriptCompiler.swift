import CJavaScriptCore
import CouchCore
import Foundation

/// Design documents in CoffeeScript (`"language": "coffeescript"`): CouchDB compiles each
/// function to JavaScript with the CoffeeScript compiler inside its engine; so does a worker,
/// with the compiler Debian ships (package libjs-coffeescript), loaded on first use only.
extension ScriptContext {
    /// Where the compiler is: `COUCHETTE_COFFEESCRIPT`, else Debian's browser build.
    static let coffeeScriptPath = ProcessInfo.processInfo.environment["COUCHETTE_COFFEESCRIPT"]
        ?? "/usr/share/javascript/coffeescript/coffee-script.js"

    /// The design document's `language` ("javascript" when absent or unreadable).
    static func language(of ddoc: [UInt8]?) -> String {
        // Only a design document that mentions CoffeeScript pays for parsing it (Fauxton writes
        // `"language": "javascript"` into every design document).
        guard let ddoc, ddoc.containsSubsequence(coffeeScriptName),
              let value = try? JSONValue.parse(ddoc) else { return "javascript" }
        return value["language"]?.stringValue ?? "javascript"
    }

    private static let coffeeScriptName = Array(#""coffeescript""#.utf8)

    /// `source` compiled to JavaScript (`bare`, as CouchDB compiles it); CouchDB's
    /// `compilation_error` when it does not compile, `unknown_query_language` without a compiler.
    func transpileCoffeeScript(_ source: String) throws(CouchError) -> String {
        if !isCoffeeScriptLoaded {
            try loadCoffeeScript()
            isCoffeeScriptLoaded = true
        }
        let transpile = try driver("transpileCoffee")
        let text = JSStringCreateWithUTF8CString(source)
        defer { JSStringRelease(text) }
        let value: JSValueRef?
        do {
            value = try call(transpile, arguments: [JSValueMakeString(context, text)])
        } catch let thrown {
            throw CouchError(.compilationError, "\(scriptError(thrown.value).reason) (\(source))")
        }
        guard let value, JSValueIsString(context, value) else {
            throw CouchError(.compilationError, "CoffeeScript compiled to nothing (\(source))")
        }
        return string(value)
    }

    private func loadCoffeeScript() throws(CouchError) {
        guard let data = FileManager.default.contents(atPath: Self.coffeeScriptPath) else {
            throw CouchError.named("unknown_query_language", "coffeescript")
        }
        var text = String(decoding: data, as: UTF8.self)
        // Debian's build is an ES module; its trailing `export` statements are no script syntax.
        if let exports = text.range(of: "export default CoffeeScript;", options: .backwards) {
            text = String(text[..<exports.lowerBound])
        }
        // In a function of its own, so its helpers do not become globals of the functions.
        try evaluate("__couchette.coffeeScript = (function() {\n\(text)\n;return CoffeeScript;}).call(this);",
                     name: "coffee-script.js")
    }
}

private extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard needle.count <= count, let first = needle.first else { return needle.isEmpty }
        var index = startIndex
        while let found = self[index...].firstIndex(of: first), found + needle.count <= count {
            if self[found..<found + needle.count].elementsEqual(needle) { return true }
            index = found + 1
        }
        return false
    }
}
