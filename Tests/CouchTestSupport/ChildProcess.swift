import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, with the part of Foundation's `Process` the
/// tests use. On Linux `Process.run()` lists `/proc/self/fd` to close each descriptor in the
/// child, copying every entry's whole 256-byte name field out of the directory buffer: with
/// more than ~1,300 descriptors open (the suite's process reaches ~5,000) the entries at the end
/// of a full buffer are read past it, and when the buffer ends where a malloc arena's mapped
/// memory ends the test process crashes (three full runs in five on 2026-11-24). Here the child
/// closes them itself (`posix_spawn_file_actions_addclosefrom_np`).
public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String] = []
    /// nil: the test process's environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `Pipe` (the child gets one end) or a `FileHandle`; nil is `/dev/null`, as with `Process`.
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?
    public private(set) var processIdentifier: Int32 = 0
    private let lock = NSLock()
    /// The wait status, once the child has been reaped.
    private var waitStatus: Int32?

    public init() {}

    public func run() throws {
        guard let path = executableURL?.path else { throw TestServerError.unexpected("no executable to run") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(devNull) }
        for (target, stream) in [(STDIN_FILENO, standardInput), (STDOUT_FILENO, standardOutput), (STDERR_FILENO, standardError)] {
            posix_spawn_file_actions_adddup2(&actions, Self.descriptor(of: stream, input: target == STDIN_FILENO) ?? devNull, target)
        }
        if let directory = currentDirectoryURL?.path { _ = Self.addChangeDirectory?(&actions, directory) }
        _ = Self.addCloseFrom?(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The runner's threads may block signals: the child starts with none blocked and
        // SIGTERM, SIGINT and SIGPIPE at their defaults, in a process group of its own.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0)=\($1)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw TestServerError.unexpected("cannot start \(path): \(String(cString: strerror(result)))")
        }
        processIdentifier = pid
        // As `Process` does: the ends the child writes to (reads from) are closed here.
        var closed: [Pipe] = []
        for case let pipe as Pipe in [standardOutput, standardError] where !closed.contains(where: { $0 === pipe }) {
            pipe.fileHandleForWriting.closeFile()
            closed.append(pipe)
        }
        (standardInput as? Pipe)?.fileHandleForReading.closeFile()
    }

    public var isRunning: Bool {
        lock.withLock {
            guard processIdentifier > 0, waitStatus == nil else { return false }
            var status: Int32 = 0
            let result = waitpid(processIdentifier, &status, WNOHANG)
            if result == processIdentifier { waitStatus = status }
            return result == 0
        }
    }

    public func waitUntilExit() {
        while isRunning { usleep(10_000) }
    }

    public func terminate() {
        if processIdentifier > 0 { kill(processIdentifier, SIGTERM) }
    }

    /// The exit code, or the signal that ended the process.
    public var terminationStatus: Int32 {
        let status = lock.withLock { waitStatus } ?? 0
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    public var terminationReason: Process.TerminationReason {
        (lock.withLock { waitStatus } ?? 0) & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    private static func descriptor(of stream: Any?, input: Bool) -> Int32? {
        switch stream {
        case let pipe as Pipe: input ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle: handle.fileDescriptor
        default: nil
        }
    }

    // glibc extensions (2.34 and 2.29), declared by its headers only for _GNU_SOURCE.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private static let addCloseFrom: CloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
    private static let addChangeDirectory: ChangeDirectory? = symbol("posix_spawn_file_actions_addchdir_np")

    private static func symbol<T>(_ name: String) -> T? {
        guard let address = dlsym(dlopen(nil, RTLD_NOW), name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}
