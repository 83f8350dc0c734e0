import CouchCore
@testable import CouchFunctionsEngine
import Testing

/// The engine itself, as a worker process runs it: compilation, CouchDB's environment, errors.
/// (Limits are the server's: `FunctionWorkerTests`.)
@Suite struct ScriptContextTests {
    @Test func functionsSeeCouchDBsEnvironment() throws {
        let context = try ScriptContext()
        let ddoc = Array(#"{"_id":"_design/a","lib":{"util":"exports.twice = function(x) { return 2 * x; }"}}"#.utf8)
        let function = try context.function("k", source: """
            function(doc) { log("checking " + doc._id); return [sum([1, 2, 3]), toJSON({a: 1}), isArray([]),
                            require('lib/util').twice(21), this._id]; }
            """, designDocument: ddoc)
        let result = try context.call(function, arguments: [context.value(json: Array(#"{"_id":"x"}"#.utf8))])
        #expect(context.json(result) == [6, "{\"a\":1}", true, 42, "_design/a"])
    }

    @Test func badSourceIsACompilationError() throws {
        let context = try ScriptContext()
        #expect(throws: CouchError(.compilationError, "Expression does not eval to a function. (42)")) {
            try context.compile("42", designDocument: nil)
        }
        do {
            try context.compile("function(doc) { return doc. }", designDocument: nil)
            Issue.record("compiled")
        } catch {
            #expect(error.kind == .compilationError)
            #expect(error.reason.hasPrefix("SyntaxError"), "\(error.reason)")
            #expect(error.reason.hasSuffix("(function(doc) { return doc. })"))
        }
    }
}
