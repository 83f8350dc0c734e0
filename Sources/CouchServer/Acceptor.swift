import CMicroHTTPD  // for epoll, which its shim header brings; no libmicrohttpd call here
import CouchCore
import Foundation

/// Accepts connections before libmicrohttpd sees them, and hands over only those whose
/// request head has fully arrived and is sound.
///
/// Why: libmicrohttpd answers some bad requests itself, with HTML (and, for a bad
/// `Content-Length`, with its status line twice), and it renews a connection's idle timeout
/// with every byte, so a client that trickles its headers holds a connection forever.
/// Here the first request's head is read with `MSG_PEEK` (it stays in the socket for
/// libmicrohttpd) under a deadline that does not move, refused with CouchDB's JSON when it
/// is too large or its body framing is wrong, and connections still sending their head
/// are capped in total and per client address, the oldest evicted first (a real client
/// sends its head at once). When the server is full, a new connection gets 503 with
/// CouchDB's JSON; a descriptor kept in reserve lets it answer even when none are left.
final class Acceptor: @unchecked Sendable {
    struct Limits {
        var headerDeadlineSeconds: Double
        var maximumURLLength: Int
        var maximumHeaderSize: Int
        var connectionLimit: Int
        var connectionsPerAddress: Int
    }

    private struct Pending {
        let address: sockaddr_in
        let deadline: Double
        /// Set once an error answer has been written: the connection is drained, then closed.
        var closing = false
        var addressKey: UInt32 { address.sin_addr.s_addr }
    }

    private let limits: Limits
    private let listenDescriptor: Int32
    private let poller: Int32
    private let handOff: (Int32, sockaddr_in) -> Void
    private let openConnections: () -> Int
    private let openConnectionsFrom: (UInt32) -> Int
    private var pending: [Int32: Pending] = [:]
    private var pendingByAddress: [UInt32: Int] = [:]
    private var reserve: Int32 = -1
    private var stopping = false
    private let stopped = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    let port: Int

    private var maximumPending: Int { max(64, limits.connectionLimit / 2) }
    private var maximumPendingPerAddress: Int { max(16, limits.connectionLimit / 4) }
    private var headCapacity: Int { limits.maximumURLLength + limits.maximumHeaderSize + 1024 }

    init(bindAddress: in_addr, port: Int, limits: Limits, openConnections: @escaping () -> Int,
         openConnectionsFrom: @escaping (UInt32) -> Int, handOff: @escaping (Int32, sockaddr_in) -> Void) throws {
        self.limits = limits
        self.handOff = handOff
        self.openConnections = openConnections
        self.openConnectionsFrom = openConnectionsFrom
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw CouchError.internalError("cannot create a socket") }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr = bindAddress
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 1024) == 0 else {
            close(descriptor)
            throw CouchError.internalError("cannot listen on port \(port)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        listenDescriptor = descriptor
        poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: descriptor))
        epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event)
        reserve = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    func start() {
        let thread = Thread { [self] in run() }
        thread.name = "couchette-acceptor"
        thread.start()
    }

    func stop() {
        lock.withLock { stopping = true }
        stopped.wait()
    }

    // MARK: - The loop

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while !lock.withLock({ stopping }) {
            let count = epoll_wait(poller, &events, Int32(events.count), 100)
            for index in 0..<max(0, Int(count)) {
                let descriptor = events[index].data.fd
                let hangup = events[index].events & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0
                if descriptor == listenDescriptor { acceptAll() } else { examine(descriptor, peerClosed: hangup) }
            }
            expire(now: Self.now())
        }
        for descriptor in pending.keys { close(descriptor) }
        pending.removeAll()
        close(listenDescriptor)
        close(poller)
        if reserve >= 0 { close(reserve) }
        stopped.signal()
    }

    private func acceptAll() {
        while true {
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let descriptor = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listenDescriptor, $0, &length)
                }
            }
            if descriptor >= 0 {
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            }
            if descriptor < 0 {
                if errno == EMFILE || errno == ENFILE { shedWithoutDescriptors() }
                return
            }
            if openConnections() + pending.count >= limits.connectionLimit {
                refuse(descriptor, address: address, status: 503,
                       error: CouchError(.serviceUnavailable, "Too many connections; try again later"))
                continue
            }
            let key = address.sin_addr.s_addr
            if openConnectionsFrom(key) + pendingByAddress[key, default: 0] >= limits.connectionsPerAddress {
                refuse(descriptor, address: address, status: 503,
                       error: CouchError(.serviceUnavailable, "Too many connections from this address; try again later"))
                continue
            }
            if pending.count >= maximumPending { evictOldest(from: nil) }
            if pendingByAddress[address.sin_addr.s_addr, default: 0] >= maximumPendingPerAddress {
                evictOldest(from: address.sin_addr.s_addr)
            }
            var event = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue,
                                    data: epoll_data_t(fd: descriptor))
            epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event)
            pending[descriptor] = Pending(address: address, deadline: Self.now() + limits.headerDeadlineSeconds)
            pendingByAddress[address.sin_addr.s_addr, default: 0] += 1
            examine(descriptor)
        }
    }

    /// Out of descriptors: free the reserve to answer one client 503, else stop accepting briefly.
    private func shedWithoutDescriptors() {
        // The reserve could not be taken back last time: perhaps it can now.
        if reserve < 0 { reserve = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        guard reserve >= 0 else {
            // Not a descriptor to answer with (the limit may be 0): wait rather than spin on
            // a listening socket that stays readable.
            usleep(50_000)
            return
        }
        close(reserve)
        reserve = -1
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let descriptor = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listenDescriptor, $0, &length) }
        }
        if descriptor >= 0 {
            let response = Self.response(status: 503, CouchError(.serviceUnavailable, "Too many open files; try again later"))
            _ = response.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(descriptor)
        }
        reserve = open("/dev/null", O_RDONLY | O_CLOEXEC)
        if reserve < 0 { usleep(50_000) }   // nothing to answer with: let clients leave first
    }

    /// Reads (peeks at) what a pending connection has sent. `peerClosed`: the client has shut
    /// down its side, so a head still incomplete never will be, and the connection is closed
    /// now (`MSG_PEEK` sees the bytes before the end, never the end itself).
    private func examine(_ descriptor: Int32, peerClosed: Bool = false) {
        guard let state = pending[descriptor] else { return }
        if state.closing {
            var sink = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(descriptor, &sink, sink.count, 0)
                if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return forget(descriptor) }
                if count < 0 { return }
            }
        }
        var buffer = [UInt8](repeating: 0, count: headCapacity)
        let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_PEEK))
        if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return forget(descriptor) }
        guard count > 0 else { return }
        let head = buffer[..<count]
        guard let end = Self.endOfHead(head) else {
            if peerClosed { return forget(descriptor) }
            if count >= buffer.count {
                let lineEnds = head.firstIndex(of: 10) != nil
                refuse(descriptor, address: state.address, status: lineEnds ? 431 : 414,
                       error: lineEnds ? CouchError(.headerTooLarge, "Request headers are too large")
                                       : CouchError(.uriTooLong, "URL is too long"))
            }
            return
        }
        if let (status, error) = check(Array(head[..<end])) {
            return refuse(descriptor, address: state.address, status: status, error: error)
        }
        epoll_ctl(poller, EPOLL_CTL_DEL, descriptor, nil)
        untrack(descriptor)
        handOff(descriptor, state.address)
    }

    /// The request line and headers: sizes and body framing. Lines may end with a bare LF, as
    /// libmicrohttpd (and CouchDB) accept.
    private func check(_ head: [UInt8]) -> (Int, CouchError)? {
        let lines = head.split(separator: 10, omittingEmptySubsequences: false).map { $0.last == 13 ? $0.dropLast() : $0 }
        guard let requestLine = lines.first else { return nil }
        let parts = requestLine.split(separator: 32)
        if parts.count >= 2, parts[1].count > limits.maximumURLLength {
            return (414, CouchError(.uriTooLong, "URL is too long"))
        }
        // `METHOD target HTTP/1.x` (libmicrohttpd would close the connection without a word).
        guard parts.count == 3, parts[2].starts(with: Array("HTTP/1.".utf8)) else {
            return (400, CouchError.badRequest("Malformed request line"))
        }
        if head.count - requestLine.count > limits.maximumHeaderSize {
            return (431, CouchError(.headerTooLarge, "Request headers are too large"))
        }
        var lengths: [String] = []
        var codings: [String] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingWhitespace()
            if name == "content-length" {
                lengths.append(value)
            } else if name == "transfer-encoding" {
                codings.append(value)
            }
        }
        if !codings.isEmpty {
            // libmicrohttpd decodes `chunked` alone; any other coding it would take for a body
            // that ends with the connection (CouchDB answers `unknown_transfer_encoding` too).
            let coding = codings.joined(separator: ", ")
            guard coding.lowercased() == "chunked" else { return (501, Self.unknownTransferEncoding(coding)) }
            if !lengths.isEmpty { return (400, CouchError.badRequest("Content-Length and Transfer-Encoding must not both be given")) }
            return nil
        }
        if Set(lengths.flatMap { $0.split(separator: ",").map { $0.trimmingWhitespace() } }).count > 1 {
            return (400, CouchError.badRequest("Conflicting Content-Length headers"))
        }
        if let length = lengths.first {
            // One number per header: libmicrohttpd reads no list (`7, 7`), and would answer
            // it with its own page (and its status line twice).
            guard !length.isEmpty, length.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
                return (400, CouchError.badRequest("Invalid Content-Length"))
            }
            if UInt64(length) == nil { return (413, CouchError(.tooLarge, "Request body is too large")) }
        }
        return nil
    }

    static func unknownTransferEncoding(_ coding: String) -> CouchError {
        CouchError(.notImplemented, coding, name: "unknown_transfer_encoding")
    }

    // MARK: - Bookkeeping

    private func refuse(_ descriptor: Int32, address: sockaddr_in, status: Int, error: CouchError) {
        let response = Self.response(status: status, error)
        _ = response.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        // Read what the client still sends, so that closing does not reset the connection
        // before the answer is read.
        shutdown(descriptor, Int32(SHUT_WR))
        if pending[descriptor] == nil {
            var event = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue,
                                    data: epoll_data_t(fd: descriptor))
            epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event)
            pendingByAddress[address.sin_addr.s_addr, default: 0] += 1
        }
        pending[descriptor] = Pending(address: address, deadline: Self.now() + 1, closing: true)
        examine(descriptor)
    }

    private func evictOldest(from address: UInt32?) {
        let candidates = pending.filter { address == nil || $0.value.addressKey == address }
        guard let oldest = candidates.min(by: { $0.value.deadline < $1.value.deadline }) else { return }
        forget(oldest.key)
    }

    private func expire(now: Double) {
        for (descriptor, state) in pending where state.deadline <= now { forget(descriptor) }
    }

    private func untrack(_ descriptor: Int32) {
        guard let state = pending.removeValue(forKey: descriptor) else { return }
        let remaining = pendingByAddress[state.addressKey, default: 1] - 1
        pendingByAddress[state.addressKey] = remaining > 0 ? remaining : nil
    }

    private func forget(_ descriptor: Int32) {
        guard pending[descriptor] != nil else { return }
        epoll_ctl(poller, EPOLL_CTL_DEL, descriptor, nil)
        untrack(descriptor)
        close(descriptor)
    }

    // MARK: - Helpers

    /// Where the head ends: after the first empty line, its line ends CRLF or a bare LF.
    private static func endOfHead(_ bytes: ArraySlice<UInt8>) -> Int? {
        var index = bytes.startIndex
        while let newline = bytes[index...].firstIndex(of: 10) {
            let next = newline + 1
            if next < bytes.endIndex, bytes[next] == 10 { return next + 1 }
            if next + 1 < bytes.endIndex, bytes[next] == 13, bytes[next + 1] == 10 { return next + 2 }
            index = next
        }
        return nil
    }

    static func response(status: Int, _ error: CouchError) -> [UInt8] {
        let reasons = [400: "Bad Request", 413: "Request Entity Too Large", 414: "URI Too Long",
                       431: "Request Header Fields Too Large", 501: "Not Implemented", 503: "Service Unavailable"]
        var body: [UInt8] = []
        error.json.write(to: &body)
        body.append(10)
        let head = "HTTP/1.1 \(status) \(reasons[status] ?? "Error")\r\nContent-Type: application/json\r\n"
            + "Server: \(ServerInfo.serverHeader)\r\nDate: \(HTTPDate.now())\r\nCache-Control: must-revalidate\r\n"
            + "X-Couch-Request-ID: \(RequestForms.requestID())\r\n"
            + "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
