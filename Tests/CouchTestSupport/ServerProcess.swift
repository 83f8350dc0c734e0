import Foundation

/// The `couchette` executable started as its own process, for tests that measure the
/// server from outside (resident memory, threads, logs).
public final class ServerProcess: @unchecked Sendable {
    public let process = ChildProcess()
    public let directory: String
    public private(set) var port = 0
    private let output = Pipe()
    public let errorOutput = Pipe()

    /// Starts `couchette serve --port 0` on a fresh data directory and waits for its banner;
    /// `openFileLimit`: under that soft and hard limit of open files (`ulimit -n`).
    public init(arguments: [String] = [], directory existing: String? = nil, environment: [String: String] = [:],
                openFileLimit: Int? = nil) throws {
        directory = existing ?? TestServer.makeTemporaryDirectory()
        let serve = ["serve", "--port", "0", "--data-dir", directory] + arguments
        if let openFileLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -n \(openFileLimit) && ulimit -Hn \(openFileLimit) && exec \"$0\" \"$@\"",
                                 ServerProcess.executable.path] + serve
        } else {
            process.executableURL = ServerProcess.executable
            process.arguments = serve
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardOutput = output
        process.standardError = errorOutput
        try launch(process)
        let deadline = Date().addingTimeInterval(20)
        var banner = ""
        while !banner.contains("\n"), Date() < deadline {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            banner += String(decoding: data, as: UTF8.self)
        }
        guard let range = banner.range(of: "127.0.0.1:"),
              let port = Int(banner[range.upperBound...].prefix { $0.isNumber }) else {
            process.terminate()
            throw TestServerError.unexpected("couchette did not start: \(banner)")
        }
        self.port = port
    }

    /// The built `couchette` binary beside the test bundle.
    public static var executable: URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("couchette").path),
              directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("couchette")
    }

    /// A field of /proc/PID/status in kilobytes (VmRSS, VmHWM) or a count (Threads).
    public func status(_ field: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            return Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// Stops the server and returns what it wrote to standard error. A server that has not
    /// exited 30 s after SIGTERM is killed, so that a wedged one fails its test instead of
    /// hanging the run.
    @discardableResult
    public func stop(keepData: Bool = false) -> String {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(30)
            while process.isRunning, Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        let log = String(decoding: errorOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        if !keepData { try? FileManager.default.removeItem(atPath: directory) }
        return log
    }

    deinit { if process.isRunning { process.terminate() } }
}

/// Sets a process's soft limit of `resource` (`prlimit(2)`, looked up by name: Swift's Glibc
/// does not export it) to `value`, or to its hard limit when nil; whether that worked.
public func setResourceLimit(_ pid: Int32, _ resource: __rlimit_resource, to value: UInt64?) -> Bool {
    typealias PRLimit = @convention(c) (Int32, Int32, UnsafePointer<rlimit>?, UnsafeMutablePointer<rlimit>?) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prlimit") else { return false }
    let prlimit = unsafeBitCast(symbol, to: PRLimit.self)
    let kind = Int32(resource.rawValue)
    var current = rlimit()
    guard prlimit(pid, kind, nil, &current) == 0 else { return false }
    var limit = rlimit(rlim_cur: rlim_t(min(value ?? UInt64(current.rlim_max), UInt64(current.rlim_max))),
                       rlim_max: current.rlim_max)
    return prlimit(pid, kind, &limit, nil) == 0
}

/// Starts `process` (`ChildProcess` says why not Foundation's `Process`).
public func launch(_ process: ChildProcess) throws {
    try process.run()
}
