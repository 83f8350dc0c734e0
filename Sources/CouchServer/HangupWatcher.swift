import CMicroHTTPD  // for epoll, which its shim header brings; no libmicrohttpd call here
import Foundation

/// Notices clients that hang up while their connection is suspended (a change feed waiting
/// for changes). libmicrohttpd does not poll a suspended connection, so without this a
/// closed feed would keep its descriptor and its place until its next heartbeat or timeout,
/// and a server full of departed clients would not recover. The socket is watched for a
/// hang-up only while suspended; a hang-up resumes the connection, and libmicrohttpd then
/// reads the end of the stream and closes it.
final class HangupWatcher: @unchecked Sendable {
    private struct Watch {
        let descriptor: Int32
        let hungUp: () -> Void
    }

    private let poller = epoll_create1(Int32(EPOLL_CLOEXEC))
    private let lock = NSLock()
    /// By token, not by descriptor: an event the watcher has taken from the kernel may be for
    /// a descriptor unwatched, closed and reused since; its token then finds nothing.
    private var watched: [UInt64: Watch] = [:]
    private var tokens: [Int32: UInt64] = [:]
    private var nextToken: UInt64 = 1
    private var stopping = false
    private let stopped = DispatchSemaphore(value: 0)

    init() {
        let thread = Thread { [self] in run() }
        thread.name = "couchette-hangups"
        thread.start()
    }

    /// Calls `hungUp` once if the peer of `descriptor` closes before `unwatch`.
    func watch(_ descriptor: Int32, hungUp: @escaping () -> Void) {
        guard descriptor >= 0 else { return }
        let token = lock.withLock {
            if let earlier = tokens[descriptor] { watched[earlier] = nil }
            let token = nextToken
            nextToken += 1
            tokens[descriptor] = token
            watched[token] = Watch(descriptor: descriptor, hungUp: hungUp)
            return token
        }
        var event = epoll_event(events: EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue, data: epoll_data_t(u64: token))
        if epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event) != 0 {
            epoll_ctl(poller, EPOLL_CTL_MOD, descriptor, &event)
        }
    }

    func unwatch(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        lock.withLock {
            if let token = tokens.removeValue(forKey: descriptor) { watched[token] = nil }
        }
        epoll_ctl(poller, EPOLL_CTL_DEL, descriptor, nil)
    }

    func stop() {
        lock.withLock { stopping = true }
        stopped.wait()
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while !lock.withLock({ stopping }) {
            let count = epoll_wait(poller, &events, Int32(events.count), 100)
            for index in 0..<max(0, Int(count)) {
                let token = events[index].data.u64
                let hungUp = lock.withLock { () -> (() -> Void)? in
                    guard let watch = watched.removeValue(forKey: token) else { return nil }
                    if tokens[watch.descriptor] == token { tokens[watch.descriptor] = nil }
                    return watch.hungUp
                }
                hungUp?()
            }
        }
        close(poller)
        stopped.signal()
    }
}
