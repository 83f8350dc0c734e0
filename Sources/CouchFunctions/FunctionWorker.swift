import CouchCore
import Foundation

/// One `couchette-functions` process: it runs the design functions of one database (its
/// `owner`) and answers one call at a time. A process of its own is what keeps tenants apart
/// and the server alive: nothing a function changes in its engine (prototypes, globals) is seen
/// by another database's functions, and a function that loops inside one native call or
/// allocates gigabytes there (`new Uint8Array(n).fill(1)`, `'x'.repeat(n).split('')`), which no
/// engine check can interrupt, costs only this process, killed at its limits. CouchDB gets the
/// same from its `couchjs` processes.
final class FunctionWorker: @unchecked Sendable {
    let owner: String
    private let processID: pid_t
    private let socket: Int32
    /// Resident memory when the process was ready: its limit is this plus `FunctionLimits.memory`.
    private var baseline = 0
    /// Functions this process has compiled (it answers `missingFunctions` for any other).
    private var compiled: Set<String> = []
    /// Killed at a limit, stopped by its own watchdog, or dead: the pool discards it.
    private(set) var isSpent = false
    private(set) var lastUse = DispatchTime.now()

    /// How often a waiting call looks at the process's memory, the clock and its client.
    private static let checkMilliseconds: Int32 = 10
    /// Time a call may run past `FunctionLimits.timeout` before the process is killed: the
    /// worker's own watchdog stops a running script at the limit and answers.
    private static let killGraceSeconds = 2.0
    private static let maximumCompiledKeys = 2000

    init(executable: String, owner: String) throws(CouchError) {
        self.owner = owner
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw CouchError(.osProcessError, "cannot start a JavaScript worker: \(String(cString: strerror(errno)))")
        }
        defer { close(ends[1]) }
        do {
            processID = try Self.spawn(executable, socket: ends[1])
        } catch {
            close(ends[0])
            throw error
        }
        socket = ends[0]
        // The worker says it is ready once its engine and CouchDB's environment are loaded;
        // its memory then is the baseline. (Thrown from here, deinit kills it.)
        let ready = try receive(until: DispatchTime.now().uptimeNanoseconds &+ 30_000_000_000,
                                limits: FunctionLimits(timeout: 30, memory: Int.max / 2), cancellation: nil)
        if case .error(let error) = try FunctionWorkerProtocol.decodeReply(ready) { throw error }
        baseline = Self.residentMemory(of: processID)
    }

    deinit {
        kill()
        close(socket)
    }

    /// Runs one request, reading the worker's log lines on the way. `limits` bound its time and
    /// the process's memory; `cancellation` (the client gone) stops it too. A process that
    /// broke a limit is killed and its call answers `os_process_error`, as CouchDB's does.
    func run(_ request: FunctionWorkerProtocol.Request, limits: FunctionLimits, cancellation: RequestCancellation?,
             log: (String) -> Void) throws(CouchError) -> [UInt8] {
        lastUse = DispatchTime.now()
        defer { lastUse = DispatchTime.now() }
        guard !isSpent else { throw CouchError(.osProcessError, "JavaScript worker stopped") }
        var request = request
        if case .call(let call) = request { request = .call(withoutKnownSources(call)) }
        try send(FunctionWorkerProtocol.encode(request))
        let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64((limits.timeout + Self.killGraceSeconds) * 1e9)
        while true {
            let reply = try FunctionWorkerProtocol.decodeReply(try receive(until: deadline, limits: limits,
                                                                            cancellation: cancellation))
            switch reply {
            case .log(let line):
                log(line)
            case .value(let json):
                if case .call(let call) = request { remember(call) }
                return json
            case .error(let error):
                if case .call(let call) = request { remember(call) }
                throw error
            case .stopped(let error):
                kill()
                throw error
            case .missingFunctions(let keys):
                // The worker forgot them (its cache was full): send their sources again.
                guard case .call(let call) = request else { throw FrameReader.malformed }
                compiled.subtract(keys)
                request = .call(withoutKnownSources(call))
                try send(FunctionWorkerProtocol.encode(request))
            }
        }
    }

    /// Whether the process kept so much of what its calls allocated (half the limit) that it
    /// should not take another: a new one gives the memory back.
    func isBloated(_ limits: FunctionLimits) -> Bool {
        Self.residentMemory(of: processID) > baseline + limits.memory / 2
    }

    func kill() {
        guard !isSpent else { return }
        isSpent = true
        terminate()
    }

    // MARK: The process

    private func terminate() {
        guard processID > 0 else { return }
        Glibc.kill(processID, SIGKILL)
        var status: Int32 = 0
        while waitpid(processID, &status, 0) < 0 && errno == EINTR {}
    }

    /// `call` with sources only for the functions this process has not compiled.
    private func withoutKnownSources(_ call: FunctionWorkerProtocol.Call) -> FunctionWorkerProtocol.Call {
        let functions = call.functions.map { function in
            compiled.contains(function.key) && function.source != nil
                ? FunctionWorkerProtocol.Function(key: function.key, source: nil, design: nil) : function
        }
        return FunctionWorkerProtocol.Call(driver: call.driver, functions: functions,
                                           functionsAsArray: call.functionsAsArray, arguments: call.arguments)
    }

    private func remember(_ call: FunctionWorkerProtocol.Call) {
        if compiled.count > Self.maximumCompiledKeys { compiled.removeAll() }
        for function in call.functions where function.source != nil { compiled.insert(function.key) }
    }

    private func send(_ frame: [UInt8]) throws(CouchError) {
        var sent = 0
        while sent < frame.count {
            let count = frame.withUnsafeBytes { Glibc.send(socket, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw died() }
            sent += count
        }
    }

    /// One reply frame, waiting at most until `deadline`, checking the process's memory and
    /// the client every few milliseconds meanwhile.
    private func receive(until deadline: UInt64, limits: FunctionLimits,
                         cancellation: RequestCancellation?) throws(CouchError) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 4)
        try read(into: &header, until: deadline, limits: limits, cancellation: cancellation)
        let length = header.withUnsafeBytes { FrameWriter.length($0) }
        var body = [UInt8](repeating: 0, count: length)
        try read(into: &body, until: deadline, limits: limits, cancellation: cancellation)
        return body
    }

    private func read(into buffer: inout [UInt8], until deadline: UInt64, limits: FunctionLimits,
                      cancellation: RequestCancellation?) throws(CouchError) {
        var received = 0
        while received < buffer.count {
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Self.checkMilliseconds)
            if ready < 0 && errno != EINTR { throw died() }
            if ready <= 0 {
                try checkLimits(deadline: deadline, limits: limits, cancellation: cancellation)
                continue
            }
            let count = buffer.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress! + received, $0.count - received, 0) }
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { throw died() }
            received += count
        }
    }

    private func checkLimits(deadline: UInt64, limits: FunctionLimits, cancellation: RequestCancellation?) throws(CouchError) {
        if cancellation?.isCancelled == true {
            kill()
            throw CouchError.clientGone
        }
        if DispatchTime.now().uptimeNanoseconds > deadline {
            kill()
            throw CouchError(.osProcessError, "JavaScript function stopped after \(FunctionLimits.seconds(limits.timeout)) (os_process_timeout)")
        }
        if Self.residentMemory(of: processID) > baseline + limits.memory {
            kill()
            throw CouchError(.osProcessError, "JavaScript function stopped: it allocated more than \(limits.memory / (1024 * 1024)) MB")
        }
    }

    /// The process ended on its own (a crash: the engine aborts when memory runs out).
    private func died() -> CouchError {
        kill()
        return CouchError(.osProcessError, "JavaScript worker exited unexpectedly")
    }

    /// Resident memory of a process in bytes (`/proc/PID/statm`); 0 when it cannot be read.
    static func residentMemory(of process: pid_t) -> Int {
        let descriptor = open("/proc/\(process)/statm", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = Glibc.read(descriptor, &buffer, buffer.count)
        guard count > 0 else { return 0 }
        let fields = buffer[..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * pageSize
    }

    private static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

    /// Starts the worker with the socket's other end as its descriptor 3, `/dev/null` as its
    /// input and output, the server's standard error as its own, every other descriptor
    /// closed, no signal blocked, and the server's environment (`JSC_*` options included).
    private static func spawn(_ executable: String, socket: Int32) throws(CouchError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, socket, FunctionWorkerProtocol.workerDescriptor)
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        _ = addCloseFrom(&actions, FunctionWorkerProtocol.workerDescriptor + 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE, SIGXFSZ] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = [strdup(executable), nil]
        defer { argv.forEach { free($0) } }
        var processID: pid_t = 0
        let result = posix_spawn(&processID, executable, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw CouchError(.osProcessError, "cannot start the JavaScript worker \(executable): \(String(cString: strerror(result)))")
        }
        return processID
    }
}

/// glibc 2.34's `posix_spawn_file_actions_addclosefrom_np`, declared by its header only for _GNU_SOURCE.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func addCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
