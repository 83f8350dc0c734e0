import CJavaScriptCore
import CouchCore
import CouchFunctions
import Foundation

/// The loop of a `couchette-functions` process: one JavaScript engine, requests from the server
/// on descriptor 3 (`FunctionWorkerProtocol`), one answer each. The server owns every limit and
/// kills this process at them; when the server goes away, the socket ends and so does this loop.
public enum FunctionWorkerService {
    private static let socket = FunctionWorkerProtocol.workerDescriptor

    public static func run() -> Never {
        signal(SIGPIPE, SIG_IGN)
        exitWithServer()
        ScriptContext.logLine = { send(.log($0)) }
        let context: ScriptContext
        do {
            context = try ScriptContext()
        } catch {
            send(.error(error))
            exit(1)
        }
        send(.value([]))   // ready
        while let frame = receive() {
            let reply: FunctionWorkerProtocol.Reply
            do {
                switch try FunctionWorkerProtocol.decodeRequest(frame) {
                case .call(let call):
                    reply = try perform(call, in: context)
                case .compile(let source, let design):
                    try context.compile(source, designDocument: design)
                    reply = .value([])
                }
            } catch {
                reply = .error(error)
            }
            send(reply)
        }
        exit(0)
    }

    /// Ends the process when the server's end of the socket closes, even in the middle of a
    /// call that never reads again (a loop the server gave up on, a server killed).
    private static func exitWithServer() {
        var thread = pthread_t()
        pthread_create(&thread, nil, { _ in
            var descriptor = pollfd(fd: FunctionWorkerProtocol.workerDescriptor, events: 0x2000, revents: 0)   // POLLRDHUP (a _GNU_SOURCE name)
            while poll(&descriptor, 1, -1) < 0 && errno == EINTR {}
            _exit(0)
        }, nil)
    }

    private static func perform(_ call: FunctionWorkerProtocol.Call, in context: ScriptContext) throws(CouchError) -> FunctionWorkerProtocol.Reply {
        let missing = call.functions.filter { $0.source == nil && context.cachedFunction($0.key) == nil }.map(\.key)
        guard missing.isEmpty else { return .missingFunctions(missing) }
        var functions: [JSObjectRef] = []
        for function in call.functions {
            if let source = function.source {
                functions.append(try context.function(function.key, source: source, designDocument: function.design))
            } else if let cached = context.cachedFunction(function.key) {
                functions.append(cached)
            }
        }
        let driver = try context.driver(call.driver)
        var arguments: [JSValueRef?] = call.functionsAsArray ? [context.array(functions)] : functions
        arguments += call.arguments.map { context.value(json: $0) }
        arguments.forEach { _ = context.retain($0) }
        defer { arguments.forEach(context.release) }
        do {
            return .value(context.jsonBytes(try context.call(driver, arguments: arguments)))
        } catch let thrown {
            return .error(context.scriptError(thrown.value))
        }
    }

    private static func send(_ reply: FunctionWorkerProtocol.Reply) {
        let frame = FunctionWorkerProtocol.encode(reply)
        var sent = 0
        while sent < frame.count {
            let count = frame.withUnsafeBytes { write(socket, $0.baseAddress! + sent, $0.count - sent) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { exit(0) }   // the server is gone
            sent += count
        }
    }

    /// The next request's frame; nil when the server closed the socket.
    private static func receive() -> [UInt8]? {
        var header = [UInt8](repeating: 0, count: 4)
        guard readFully(&header) else { return nil }
        var frame = [UInt8](repeating: 0, count: header.withUnsafeBytes { FunctionWorkerProtocol.frameLength($0) })
        return readFully(&frame) ? frame : nil
    }

    private static func readFully(_ buffer: inout [UInt8]) -> Bool {
        var received = 0
        while received < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(socket, $0.baseAddress! + received, $0.count - received) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            received += count
        }
        return true
    }
}
