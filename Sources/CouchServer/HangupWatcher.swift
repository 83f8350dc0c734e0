import CMicroHTTPD  // for epoll, which its shim header brings; no libmicrohttpd call here
import Foundation

/// Notices clients that hang up while their connection is suspended (a change feed waiting
/// for changes). libmicrohttpd does not poll a suspended connection, so without this a
/// closed feed would keep its descriptor and its place until its next heartbeat or timeout,
/// and a server full of departed clients would not recover. The socket is watched for a
/// hang-up only while suspended; a hang-up resumes the connection, and libmicrohttpd then
/// reads the end of the stream and closes it.
final class HangupWatcher: @unchecked Sendable {
    private let poller = epoll_create1(Int32(EPOLL_CLOEXEC))
    private let lock = NSLock()
    private var watched: [Int32: () -> Void] = [:]
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
        lock.withLock { watched[descriptor] = hungUp }
        var event = epoll_event(events: EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue, data: epoll_data_t(fd: descriptor))
        if epoll_ctl(poller, EPOLL_CTL_ADD, descriptor, &event) != 0 {
            epoll_ctl(poller, EPOLL_CTL_MOD, descriptor, &event)
        }
    }

    func unwatch(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        lock.withLock { watched[descriptor] = nil }
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
                let descriptor = events[index].data.fd
                let hungUp = lock.withLock { watched.removeValue(forKey: descriptor) }
                hungUp?()
            }
        }
        close(poller)
        stopped.signal()
    }
}
