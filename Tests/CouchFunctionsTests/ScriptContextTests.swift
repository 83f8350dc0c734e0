import CouchCore
@testable import CouchFunctions
import Testing

/// The engine itself: compilation, CouchDB's environment, errors and limits.
@Suite struct ScriptContextTests {
    let limits = FunctionLimits(timeout: 0.5, memory: 64 * 1024 * 1024)

    @Test func functionsSeeCouchDBsEnvironment() throws {
        let context = try ScriptContext(limits: limits)
        let ddoc = Array(#"{"_id":"_design/a","lib":{"util":"exports.twice = function(x) { return 2 * x; }"}}"#.utf8)
        let function = try context.function("k", source: """
            function(doc) { log("checking " + doc._id); return [sum([1, 2, 3]), toJSON({a: 1}), isArray([]),
                            require('lib/util').twice(21), this._id]; }
            """, designDocument: ddoc)
        let result = try context.call(function, arguments: [context.value(json: Array(#"{"_id":"x"}"#.utf8))])
        #expect(context.json(result) == [6, "{\"a\":1}", true, 42, "_design/a"])
    }

    @Test func badSourceIsACompilationError() throws {
        let context = try ScriptContext(limits: limits)
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

    @Test func loopsAreStopped() throws {
        let context = try ScriptContext(limits: limits)
        let loop = try context.compile("function() { while (true) {} }", designDocument: nil)
        #expect(throws: ScriptThrow.self) { try context.call(loop, arguments: []) }
        #expect(context.stoppedBy == .timeout)
    }

    @Test func runawayAllocationsAreStopped() throws {
        let other = try ScriptContext(limits: FunctionLimits(timeout: 30, memory: 64 * 1024 * 1024))
        let hog = try other.compile("function() { var a = []; while (true) { a.push(new Array(10000).fill(1.5)); } }",
                                    designDocument: nil)
        #expect(throws: ScriptThrow.self) { try other.call(hog, arguments: []) }
        #expect(other.stoppedBy == .memory)
    }
}
