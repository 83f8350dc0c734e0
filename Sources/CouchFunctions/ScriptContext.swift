import CJavaScriptCore
import CouchCore
import Foundation
import Logging

/// How long one call may run and how large its heap may grow.
public struct FunctionLimits: Sendable {
    /// CouchDB's `[query_server_config] os_process_timeout` (5 s by default).
    public var timeout: Double
    /// Bytes of memory one call may add to the process (`[couchette] function_memory_limit`).
    public var memory: Int

    public init(timeout: Double = 5, memory: Int = 256 * 1024 * 1024) {
        self.timeout = timeout
        self.memory = memory
    }
}

/// One JavaScriptCore virtual machine (its own context group, so contexts run in parallel)
/// with one global context holding CouchDB's environment. Used by one thread at a time:
/// the `ContextPool` hands it out. Compiled functions are cached in it by key.
final class ScriptContext: @unchecked Sendable {
    private let group: JSContextGroupRef
    let context: JSGlobalContextRef
    private let limits: FunctionLimits
    private var functions: [String: JSObjectRef] = [:]
    private var callStarted = DispatchTime.now()
    private var memoryAtStart = 0
    /// Set when the watchdog stopped a call; the context is then discarded.
    private(set) var stoppedBy: StopReason?
    private static let maximumCachedFunctions = 2000
    /// How often (CPU seconds) the watchdog checks the limits during a call.
    private static let tick = 0.02

    enum StopReason { case timeout, memory }

    init(limits: FunctionLimits) throws(CouchError) {
        self.limits = limits
        group = JSContextGroupCreate()
        context = JSGlobalContextCreateInGroup(group, nil)
        armWatchdog()
        installNativeFunctions()
        _ = try evaluate(JavaScriptEnvironment.prelude, name: "couchette-environment.js")
        _ = try evaluate(RenderEnvironment.script, name: "couchette-render.js")
    }

    deinit {
        for function in functions.values { JSValueUnprotect(context, function) }
        if let filterBatch { JSValueUnprotect(context, filterBatch) }
        if let validationBatch { JSValueUnprotect(context, validationBatch) }
        for driver in drivers.values { JSValueUnprotect(context, driver) }
        JSContextGroupClearExecutionTimeLimit(group)
        JSGlobalContextRelease(context)
        JSContextGroupRelease(group)
    }

    /// Called by the watchdog on the executing thread every `tick` of CPU time.
    fileprivate func limitReached() -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        let elapsed = Double(now > callStarted.uptimeNanoseconds ? now - callStarted.uptimeNanoseconds : 0) / 1e9
        if elapsed > limits.timeout {
            stoppedBy = .timeout
            return true
        }
        // The process grew by the limit since this use began: then (only then, as it walks
        // the whole heap) see whether this context's heap is what grew.
        let resident = Self.residentMemory()
        if memoryAtStart == 0 {
            // The first tick of this use takes the baseline (reading it costs more than a
            // short call, which never reaches a tick).
            memoryAtStart = resident
        } else if resident - memoryAtStart > limits.memory {
            if heapSize() > limits.memory {
                stoppedBy = .memory
                return true
            }
            memoryAtStart = resident
        }
        // This JavaScriptCore calls back once per limit set: set it again for the next tick.
        armWatchdog()
        return false
    }

    private func armWatchdog() {
        JSContextGroupSetExecutionTimeLimit(group, Self.tick, shouldTerminate, Unmanaged.passUnretained(self).toOpaque())
    }

    private func heapSize() -> Int {
        guard let statistics = JSGetMemoryUsageStatistics(context) else { return 0 }
        func number(_ name: String) -> Int {
            let key = JSStringCreateWithUTF8CString(name)
            defer { JSStringRelease(key) }
            let value = JSValueToNumber(context, JSObjectGetProperty(context, statistics, key, nil), nil)
            return value.isFinite && value > 0 && value < 1e18 ? Int(value) : 0
        }
        return number("heapSize") + number("extraMemorySize")
    }

    /// Starts one use (a write's validation, a batch of filter calls): its memory baseline is
    /// taken at its first watchdog tick.
    func beginUse() {
        memoryAtStart = 0
    }

    /// The process's resident memory in bytes (`/proc/self/statm`): a few microseconds to
    /// read, where JavaScriptCore's own heap statistics walk the whole heap.
    static func residentMemory() -> Int {
        let descriptor = open("/proc/self/statm", O_RDONLY)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return 0 }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    // MARK: Evaluating and compiling

    /// Runs a script in the global scope; its value.
    @discardableResult
    func evaluate(_ source: String, name: String) throws(CouchError) -> JSValueRef? {
        let script = JSStringCreateWithUTF8CString(source)
        let url = JSStringCreateWithUTF8CString(name)
        defer { JSStringRelease(script); JSStringRelease(url) }
        var exception: JSValueRef?
        let value = startCall { JSEvaluateScript(context, script, nil, url, 1, &exception) }
        if let exception {
            let error = scriptError(exception)
            // couchjs reports a syntax error as `name: message`; keep the message alone for others.
            throw error.kind == .osProcessError ? error : CouchError(.compilationError, error.reason)
        }
        return value
    }

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
    /// design document as `this`. Throws `compilation_error` with couchjs's reason.
    @discardableResult
    func compile(_ source: String, designDocument ddoc: [UInt8]?) throws(CouchError) -> JSObjectRef {
        var text = Substring(source)
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

    /// `__couchette.filterBatch`: a filter applied to an array of documents in one call, as
    /// each entry into the engine costs more than a small function's work.
    lazy var filterBatch: JSObjectRef? = environmentFunction("filterBatch")
    lazy var validationBatch: JSObjectRef? = environmentFunction("validateBatch")

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

    /// Runs `__couchette.validateBatch`: one outcome per entry (see the environment).
    func validateBatch(functions: [JSObjectRef], entries: [UInt8], securityObject: [UInt8]) throws(CouchError) -> [JSONValue] {
        guard let driver = validationBatch else { throw CouchError.internalError("JavaScript environment is incomplete") }
        var exception: JSValueRef?
        let list = functions.withUnsafeBufferPointer { buffer -> JSObjectRef? in
            buffer.withMemoryRebound(to: JSValueRef?.self) { JSObjectMakeArray(context, buffer.count, $0.baseAddress, &exception) }
        }
        let values = [list, value(json: entries), value(json: securityObject)].map(retain)
        defer { values.forEach(release) }
        do {
            let outcome = json(try call(driver, arguments: values))
            guard case .array(let outcomes)? = outcome else { throw CouchError.internalError("validation answered no result") }
            return outcomes
        } catch let thrown as ScriptThrow {
            throw scriptError(thrown.value)
        } catch let error as CouchError {
            throw error
        } catch {
            throw CouchError.internalError("validation failed: \(error)")
        }
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
            startCall { JSObjectCallAsFunction(context, function, this, buffer.count, buffer.baseAddress, &exception) }
        }
        if let exception { throw ScriptThrow(value: exception) }
        return result
    }

    private func startCall<T>(_ body: () -> T) -> T {
        callStarted = DispatchTime.now()
        return body()
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

    /// What a thrown value means, after couchjs's `handleError`: the watchdog's stop,
    /// `["error", name, reason]`, `{error, reason}`, an Error (`name: message`), anything
    /// else as `unnamed_error`. Validation reads its own forms (`FunctionRuntime+Validation`).
    func scriptError(_ exception: JSValueRef) -> CouchError {
        switch stoppedBy {
        case .timeout:
            return CouchError(.osProcessError,
                              "JavaScript function stopped after \(Self.seconds(limits.timeout)) (os_process_timeout)")
        case .memory:
            return CouchError(.osProcessError,
                              "JavaScript function stopped: it allocated more than \(limits.memory / (1024 * 1024)) MB")
        case nil:
            break
        }
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

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value)) s" : "\(value) s"
    }

    // MARK: Native functions of the environment

    private func installNativeFunctions() {
        let name = JSStringCreateWithUTF8CString("log")
        defer { JSStringRelease(name) }
        let log = JSObjectMakeFunctionWithCallback(context, name, logCallback)
        JSObjectSetProperty(context, JSContextGetGlobalObject(context), name, log, JSPropertyAttributes(kJSPropertyAttributeNone), nil)
    }
}

/// A value a script threw, valid while its context is held.
struct ScriptThrow: Error, @unchecked Sendable {
    let value: JSValueRef
}

private let scriptLogger = Logger(label: "couchette.javascript")

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
    scriptLogger.info("JavaScript log: \(text)")
    return JSValueMakeUndefined(context)
}

private let shouldTerminate: JSShouldTerminateCallback = { _, info in
    guard let info else { return true }
    return Unmanaged<ScriptContext>.fromOpaque(info).takeUnretainedValue().limitReached()
}
