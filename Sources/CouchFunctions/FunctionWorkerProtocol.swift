import CouchCore

/// What the server asks a function worker process (`couchette-functions`) and what it
/// answers, as frames on a socket pair: a 4-byte big-endian length, then the frame. Inside a
/// frame every string and byte string is itself length-prefixed the same way. JSON travels as
/// text, which is what the engine reads and writes anyway.
public enum FunctionWorkerProtocol {
    /// The worker's end of the socket pair.
    public static let workerDescriptor: Int32 = 3
    /// Where the server finds the worker's executable when none is configured: beside its
    /// own (as `swift build` and the Docker image place them), else on `PATH`.
    public static let executableName = "couchette-functions"

    /// A function a call needs. The worker compiles it once under `key` (which names the
    /// database, design document, revision and function); `source` and `design` travel until
    /// the worker has it, and again if it answers `missingFunctions`.
    public struct Function: Sendable {
        public let key: String
        public let source: String?
        /// The design document's JSON, `this` of the function (nil: `{}`).
        public let design: [UInt8]?

        public init(key: String, source: String?, design: [UInt8]?) {
            self.key = key
            self.source = source
            self.design = design
        }
    }

    /// One call of an environment driver (`__couchette.<driver>`) with compiled functions and
    /// JSON arguments: the functions come first, one each or (`functionsAsArray`) as one array.
    public struct Call: Sendable {
        public let driver: String
        public let functions: [Function]
        public let functionsAsArray: Bool
        public let arguments: [[UInt8]]

        public init(driver: String, functions: [Function], functionsAsArray: Bool = false, arguments: [[UInt8]]) {
            self.driver = driver
            self.functions = functions
            self.functionsAsArray = functionsAsArray
            self.arguments = arguments
        }
    }

    public enum Request: Sendable {
        case call(Call)
        /// Compiles a function's source without keeping it: nothing, or `compilation_error`.
        case compile(source: String, design: [UInt8]?)
    }

    /// A worker sends any number of `log` replies, then one of the others.
    public enum Reply: Sendable {
        /// The driver's value as JSON (empty for `undefined`).
        case value([UInt8])
        case error(CouchError)
        /// Keys of functions the worker does not have: send them again with their source.
        case missingFunctions([String])
        /// A line a function logged (`log(...)`), for the server's log.
        case log(String)
        /// The worker stopped its call at a limit and will exit: answer `error` and drop it.
        case stopped(CouchError)
    }

    /// The length a frame's first four bytes announce.
    public static func frameLength(_ header: UnsafeRawBufferPointer) -> Int { FrameWriter.length(header) }

    // MARK: Encoding

    public static func encode(_ request: Request) -> [UInt8] {
        var frame = FrameWriter()
        switch request {
        case .call(let call):
            frame.byte(1)
            frame.string(call.driver)
            frame.byte(call.functionsAsArray ? 1 : 0)
            frame.count(call.functions.count)
            for function in call.functions {
                frame.string(function.key)
                if let source = function.source {
                    frame.byte(1)
                    frame.string(source)
                    frame.optionalBytes(function.design)
                } else {
                    frame.byte(0)
                }
            }
            frame.count(call.arguments.count)
            for argument in call.arguments { frame.bytes(argument) }
        case .compile(let source, let design):
            frame.byte(2)
            frame.string(source)
            frame.optionalBytes(design)
        }
        return frame.finished()
    }

    public static func decodeRequest(_ bytes: [UInt8]) throws(CouchError) -> Request {
        var frame = FrameReader(bytes)
        switch try frame.byte() {
        case 1:
            let driver = try frame.string()
            let asArray = try frame.byte() == 1
            var functions: [Function] = []
            for _ in 0..<(try frame.count()) {
                let key = try frame.string()
                if try frame.byte() == 1 {
                    functions.append(Function(key: key, source: try frame.string(), design: try frame.optionalBytes()))
                } else {
                    functions.append(Function(key: key, source: nil, design: nil))
                }
            }
            var arguments: [[UInt8]] = []
            for _ in 0..<(try frame.count()) { arguments.append(try frame.bytes()) }
            return .call(Call(driver: driver, functions: functions, functionsAsArray: asArray, arguments: arguments))
        case 2:
            return .compile(source: try frame.string(), design: try frame.optionalBytes())
        default:
            throw FrameReader.malformed
        }
    }

    public static func encode(_ reply: Reply) -> [UInt8] {
        var frame = FrameWriter()
        switch reply {
        case .value(let json):
            frame.byte(0)
            frame.bytes(json)
        case .error(let error), .stopped(let error):
            if case .stopped = reply { frame.byte(4) } else { frame.byte(1) }
            frame.string(error.kind.rawValue)
            frame.string(error.customName ?? "")
            frame.string(error.reason)
        case .missingFunctions(let keys):
            frame.byte(2)
            frame.count(keys.count)
            for key in keys { frame.string(key) }
        case .log(let line):
            frame.byte(3)
            frame.string(line)
        }
        return frame.finished()
    }

    public static func decodeReply(_ bytes: [UInt8]) throws(CouchError) -> Reply {
        var frame = FrameReader(bytes)
        let tag = try frame.byte()
        switch tag {
        case 0:
            return .value(try frame.bytes())
        case 1, 4:
            let kind = CouchError.Kind(rawValue: try frame.string()) ?? .unknownError
            let name = try frame.string()
            let reason = try frame.string()
            let error = name.isEmpty ? CouchError(kind, reason) : CouchError(kind, reason, name: name)
            return tag == 1 ? .error(error) : .stopped(error)
        case 2:
            var keys: [String] = []
            for _ in 0..<(try frame.count()) { keys.append(try frame.string()) }
            return .missingFunctions(keys)
        case 3:
            return .log(try frame.string())
        default:
            throw FrameReader.malformed
        }
    }
}

/// Builds one frame: its length is written in front when it is finished.
struct FrameWriter {
    private var buffer: [UInt8] = [0, 0, 0, 0]

    mutating func byte(_ value: UInt8) { buffer.append(value) }

    mutating func count(_ value: Int) {
        let value = UInt32(truncatingIfNeeded: value)
        buffer.append(contentsOf: [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)])
    }

    mutating func bytes(_ value: [UInt8]) {
        count(value.count)
        buffer.append(contentsOf: value)
    }

    mutating func string(_ value: String) { bytes(Array(value.utf8)) }

    /// Absent and empty are told apart: an absent value is written as length 0xFFFFFFFF.
    mutating func optionalBytes(_ value: [UInt8]?) {
        if let value { bytes(value) } else { count(Int(UInt32.max)) }
    }

    mutating func finished() -> [UInt8] {
        let length = UInt32(buffer.count - 4)
        buffer[0] = UInt8(length >> 24)
        buffer[1] = UInt8(length >> 16 & 0xff)
        buffer[2] = UInt8(length >> 8 & 0xff)
        buffer[3] = UInt8(length & 0xff)
        return buffer
    }

    /// The length a frame's first four bytes announce.
    static func length(_ header: UnsafeRawBufferPointer) -> Int {
        Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
    }
}

/// Reads one frame's contents (without its length prefix); any overrun is `malformed`.
struct FrameReader {
    static let malformed = CouchError.internalError("malformed message between the server and a function worker")
    private let buffer: [UInt8]
    private var position = 0

    init(_ buffer: [UInt8]) { self.buffer = buffer }

    mutating func byte() throws(CouchError) -> UInt8 {
        guard position < buffer.count else { throw Self.malformed }
        defer { position += 1 }
        return buffer[position]
    }

    mutating func count() throws(CouchError) -> Int {
        guard position + 4 <= buffer.count else { throw Self.malformed }
        defer { position += 4 }
        return Int(buffer[position]) << 24 | Int(buffer[position + 1]) << 16 | Int(buffer[position + 2]) << 8
            | Int(buffer[position + 3])
    }

    mutating func bytes() throws(CouchError) -> [UInt8] {
        let length = try count()
        guard length <= buffer.count - position else { throw Self.malformed }
        defer { position += length }
        return Array(buffer[position..<position + length])
    }

    mutating func optionalBytes() throws(CouchError) -> [UInt8]? {
        guard position + 4 <= buffer.count else { throw Self.malformed }
        if buffer[position..<position + 4].allSatisfy({ $0 == 0xff }) {
            position += 4
            return nil
        }
        return try bytes()
    }

    mutating func string() throws(CouchError) -> String {
        String(decoding: try bytes(), as: UTF8.self)
    }
}
