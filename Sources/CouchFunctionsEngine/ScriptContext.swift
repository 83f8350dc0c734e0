import CJavaScriptCore
import CouchCore
import CouchFunctions
import Foundation

/// One JavaScriptCore virtual machine with one global context holding CouchDB's environment,
/// in a worker process (`FunctionWorkerService`). Compiled functions are cached in it by key.
/// Limits are the server's to enforce: it watches the process and kills it at the time or
/// memory limit, which also stops what no engine check interrupts (a long native call).
final class ScriptContext {
    private let group: JSContextGroupRef
    let context: JSGlobalContextRef
    private var functions: [String: JSObjectRef] = [:]
    /// Whether the CoffeeScript compiler is loaded (`CoffeeScriptCompiler`).
    var isCoffeeScriptLoaded = false
    private static let maximumCachedFunctions = 2000
    /// Where `log(...)` lines go: to the server, in a worker (set once, before any context).
    nonisolated(unsafe) static var logLine: (String) -> Void = { _ in }

    init() throws(CouchError) {
        group = JSContextGroupCreate()
        context = JSGlobalContextCreateInGroup(group, nil)
        installNativeFunctions()
        _ = try evaluate(JavaScriptEnvironment.prelude, name: "couchette-environment.js")
        _ = try evaluate(RenderEnvironment.script, name: "couchette-render.js")
        // couchjs refuses runtime code evaluation (eval, the Function constructor) unless
        // started with --eval; functions here are compiled by the embedder, never by eval.
        let message = JSStringCreateWithUTF8CString("call to eval() or Function() blocked by CSP")
        JSGlobalContextSetEvalEnabled(context, false, message)
        JSStringRelease(message)
    }

    deinit {
        for function in functions.values { JSValueUnprotect(context, function) }
        for driver in drivers.values { JSValueUnprotect(context, driver) }
        JSGlobalContextRelease(context)
        JSContextGroupRelease(group)
    }

    // MARK: Evaluating and compiling

    /// Runs a script in the global scope; its value.
    @discardableResult
    func evaluate(_ source: String, name: String) throws(CouchError) -> JSValueRef? {
        let script = JSStringCreateWithUTF8CString(source)
        let url = JSStringCreateWithUTF8CString(name)
        defer { JSStringRelease(script); JSStringRelease(url) }
        var exception: JSValueRef?
        let value = JSEvaluateScript(context, script, nil, url, 1, &exception)
        if let exception {
            // couchjs reports a syntax error as `name: message`.
            throw CouchError(.compilationError, scriptError(exception).reason)
        }
        return value
    }

    /// The function compiled under `key`, if it is still cached.
    func cachedFunction(_ key: String) -> JSObjectRef? { functions[key] }

    /// The compiled function cached under `key`, compiling `source` on first use. `ddoc`
    /// (JSON) is the function's `this` and where `require` resolves modules.
    func function(_ key: String, source: String, designDocument ddoc: [UInt8]?) throws(CouchError) -> JSObjectRef {
        if let cached = functions[key] { return cached }
        if functions.count >= Self.maximumCachedFunctions {
            for function in functions.values { JSValueUnprotect(context, function) }
            functions.removeAll()
        }
        let object = try compile(source, designDocument: ddoc)
        JSValueProtect(context, object)
        functions[key] = object
        return object
    }

    /// Compiles a function's source as CouchDB's sandbox does: `require` in scope, the
    /// design document as `this`; CoffeeScript (the design document's `language`) is first
    /// compiled to JavaScript. Throws `compilation_error` with couchjs's reason.
    @discardableResult
    func compile(_ source: String, designDocument ddoc: [UInt8]?) throws(CouchError) -> JSObjectRef {
        let javaScript = Self.language(of: ddoc) == "coffeescript" ? try transpileCoffeeScript(source) : source
        var text = Substring(javaScript)
        while let last = text.last, last.isWhitespace || last == ";" { text.removeLast() }
        let ddocText = ddoc.map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        let wrapped = """
            (function(ddoc) { var require = __couchette.makeRequire(ddoc); var f = (
            \(text)
            ); return typeof f == "function" ? function() { return f.apply(ddoc, arguments); } : f; })(\(ddocText))
            """
        let value: JSValueRef?
        do {
            value = try evaluate(wrapped, name: "design-function.js")
        } catch {
            throw CouchError(.compilationError, "\(error.reason) (\(source))")
        }
        guard let value, JSValueIsObject(context, value), let object = JSValueToObject(context, value, nil),
              JSObjectIsFunction(context, object) else {
            throw CouchError(.compilationError, "Expression does not eval to a function. (\(source))")
        }
        return object
    }

    private var drivers: [String: JSObjectRef] = [:]

    /// `__couchette.<name>`, one of the environment's drivers (`runShow`, ...), kept for
    /// the context's life.
    func driver(_ name: String) throws(CouchError) -> JSObjectRef {
        if let cached = drivers[name] { return cached }
        guard let object = environmentFunction(name) else { throw CouchError.internalError("JavaScript environment is incomplete") }
        drivers[name] = object
        return object
    }

    private func environmentFunction(_ name: String) -> JSObjectRef? {
        guard let value = try? evaluate("__couchette.\(name)", name: name + ".js"),
              let object = JSValueToObject(context, value, nil) else { return nil }
        JSValueProtect(context, object)
        return object
    }

    /// Keeps `value` alive across calls until `release`.
    func retain(_ value: JSValueRef?) -> JSValueRef? {
        if let value { JSValueProtect(context, value) }
        return value
    }

    func release(_ value: JSValueRef?) {
        if let value { JSValueUnprotect(context, value) }
    }

    // MARK: Calling

    /// Calls `function` with `this` and arguments; throws what the function threw (read it
    /// with `scriptError`).
    func call(_ function: JSObjectRef, this: JSObjectRef? = nil, arguments: [JSValueRef?]) throws(ScriptThrow) -> JSValueRef? {
        var exception: JSValueRef?
        let result = arguments.withUnsafeBufferPointer { buffer in
            JSObjectCallAsFunction(context, function, this, buffer.count, buffer.baseAddress, &exception)
        }
        if let exception { throw ScriptThrow(value: exception) }
        return result
    }

    /// A JSON text as a value of this context (an object, array, ...); `undefined` for nil.
    func value(json: [UInt8]?) -> JSValueRef? {
        guard let json else { return JSValueMakeNull(context) }
        return json.withUnsafeBufferPointer { buffer -> JSValueRef? in
            var terminated = Array(buffer)
            terminated.append(0)
            return terminated.withUnsafeBufferPointer { pointer -> JSValueRef? in
                pointer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: pointer.count) { text in
                    let string = JSStringCreateWithUTF8CString(text)
                    defer { JSStringRelease(string) }
                    return JSValueMakeFromJSONString(context, string)
                }
            }
        }
    }

    /// A value as JSON text (empty for `undefined` and functions).
    func jsonBytes(_ value: JSValueRef?) -> [UInt8] {
        guard let value, let string = JSValueCreateJSONString(context, value, 0, nil) else { return [] }
        defer { JSStringRelease(string) }
        return Array(Self.string(string).utf8)
    }

    /// A JavaScript array of `objects`.
    func array(_ objects: [JSObjectRef]) -> JSValueRef? {
        let values: [JSValueRef?] = objects.map { $0 }
        return values.withUnsafeBufferPointer { JSObjectMakeArray(context, $0.count, $0.baseAddress, nil) }
    }

    /// A value as JSON (nil for `undefined` and functions).
    func json(_ value: JSValueRef?) -> JSONValue? {
        guard let value, let string = JSValueCreateJSONString(context, value, 0, nil) else { return nil }
        defer { JSStringRelease(string) }
        return try? JSONValue.parse(Array(Self.string(string).utf8))
    }

    func bool(_ value: JSValueRef?) -> Bool { value.map { JSValueToBoolean(context, $0) } ?? false }

    static func string(_ string: JSStringRef) -> String {
        let capacity = JSStringGetMaximumUTF8CStringSize(string)
        var buffer = [CChar](repeating: 0, count: capacity)
        let written = JSStringGetUTF8CString(string, &buffer, capacity)   // counts the terminating NUL
        return String(decoding: buffer.prefix(max(0, written - 1)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func string(_ value: JSValueRef) -> String {
        guard let string = JSValueToStringCopy(context, value, nil) else { return "" }
        defer { JSStringRelease(string) }
        return Self.string(string)
    }

    /// What a thrown value means, after couchjs's `handleError`: `["error", name, reason]`,
    /// `{error, reason}`, an Error (`name: message`), anything else as `unnamed_error`.
    /// Validation reads its own forms (`FunctionRuntime+Validation`).
    func scriptError(_ exception: JSValueRef) -> CouchError {
        let thrown = JSValueIsObject(context, exception) ? json(exception) : nil
        if case .array(let items)? = thrown, items.count == 3, items[0] == "error", let name = items[1].stringValue {
            return CouchError.named(name, items[2].stringValue ?? items[2].serializedString())
        }
        if case .object(let object)? = thrown, let name = object["error"]?.stringValue, let reason = object["reason"] {
            return CouchError.named(name, reason.stringValue ?? reason.serializedString())
        }
        if let name = property(exception, "name"), let message = property(exception, "message") {
            return CouchError.named(name, "\(name): \(message)")
        }
        return CouchError.named("unnamed_error", thrown?.serializedString() ?? string(exception))
    }

    /// A string property of an Error-like value.
    private func property(_ value: JSValueRef, _ name: String) -> String? {
        guard JSValueIsObject(context, value), let object = JSValueToObject(context, value, nil) else { return nil }
        let key = JSStringCreateWithUTF8CString(name)
        defer { JSStringRelease(key) }
        guard let property = JSObjectGetProperty(context, object, key, nil), JSValueIsString(context, property) else { return nil }
        return string(property)
    }

    // MARK: Native functions of the environment

    private func installNativeFunctions() {
        for (text, callback) in [("log", logCallback), ("__couchetteCompileModule", compileModuleCallback)] {
            let name = JSStringCreateWithUTF8CString(text)
            defer { JSStringRelease(name) }
            let function = JSObjectMakeFunctionWithCallback(context, name, callback)
            JSObjectSetProperty(context, JSContextGetGlobalObject(context), name, function, JSPropertyAttributes(kJSPropertyAttributeNone), nil)
        }
    }
}

/// A value a script threw, valid while its context is held.
struct ScriptThrow: Error, @unchecked Sendable {
    let value: JSValueRef
}

/// `log(message)`: CouchDB writes it to its log at info level; objects as JSON.
private let logCallback: JSObjectCallAsFunctionCallback = { context, _, _, count, arguments, _ in
    guard let context, count > 0, let arguments, let argument = arguments[0] else { return JSValueMakeUndefined(context) }
    var text = ""
    if JSValueIsString(context, argument) {
        if let string = JSValueToStringCopy(context, argument, nil) {
            text = ScriptContext.string(string)
            JSStringRelease(string)
        }
    } else if let string = JSValueCreateJSONString(context, argument, 0, nil) {
        text = ScriptContext.string(string)
        JSStringRelease(string)
    }
    ScriptContext.logLine(text)
    return JSValueMakeUndefined(context)
}

/// `compileModule(source, name)`: the value of `source` evaluated as a script (a CommonJS
/// module's wrapper function), which `require` needs while eval() is disabled.
private let compileModuleCallback: JSObjectCallAsFunctionCallback = { context, _, _, count, arguments, exception in
    guard let context, count > 0, let arguments, let argument = arguments[0],
          let source = JSValueToStringCopy(context, argument, exception) else { return JSValueMakeUndefined(context) }
    defer { JSStringRelease(source) }
    let name = count > 1 ? arguments[1].flatMap { JSValueToStringCopy(context, $0, nil) } : nil
    defer { if let name { JSStringRelease(name) } }
    return JSEvaluateScript(context, source, nil, name, 1, exception)
}
