import CCurl
import CShims
import Foundation

/// The one thread that drives a curl multi handle. Other threads hand it transfers to
/// start, cancel or unpause and wake it; every libcurl call on a running transfer
/// happens here, as libcurl requires. The multi handle's connection cache is what keeps
/// connections to each peer alive between requests.
final class TransferLoop: @unchecked Sendable {
    private static let globalInitialisation: Void = { curl_global_init(3) }()  // CURL_GLOBAL_ALL

    private let multi: UnsafeMutableRawPointer
    private let lock = NSLock()
    private var incoming: [Transfer] = []
    private var cancelling: [Transfer] = []
    private var resuming: [Transfer] = []
    private var stopped = false
    /// Touched only by the loop thread.
    private var running: [UnsafeMutableRawPointer: Transfer] = [:]

    init(configuration: HTTPClientConfiguration) {
        Self.globalInitialisation
        multi = curl_multi_init()!
        _ = couchette_curl_multi_set_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maximumConnectionsPerHost)
        _ = couchette_curl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, configuration.maximumCachedConnections)
        let thread = Thread { [self] in run() }
        thread.name = "curl-transfers"
        thread.start()
    }

    private var handle: UnsafeMutableRawPointer { multi }

    func submit(_ transfer: Transfer) {
        lock.lock()
        if stopped {
            lock.unlock()
            transfer.finish(code: nil)
            return
        }
        incoming.append(transfer)
        curl_multi_wakeup(handle)
        lock.unlock()
    }

    func cancel(_ transfer: Transfer) {
        transfer.requestCancellation()
        lock.lock()
        cancelling.append(transfer)
        if !stopped { curl_multi_wakeup(handle) }
        lock.unlock()
    }

    func resume(_ transfer: Transfer) {
        lock.lock()
        resuming.append(transfer)
        if !stopped { curl_multi_wakeup(handle) }
        lock.unlock()
    }

    func stop() {
        lock.lock()
        if !stopped { curl_multi_wakeup(handle) }
        stopped = true
        lock.unlock()
    }

    private func run() {
        var active: Int32 = 0
        while true {
            lock.lock()
            let isStopped = stopped
            let added = incoming
            let cancelled = cancelling
            let resumed = resuming
            incoming = []
            cancelling = []
            resuming = []
            lock.unlock()
            if isStopped {
                for transfer in added { transfer.finish(code: nil) }
                break
            }
            for transfer in added {
                if transfer.cancelRequested {
                    transfer.finish(code: nil)
                    continue
                }
                running[transfer.easy] = transfer
                transfer.noteActivity()
                curl_multi_add_handle(handle, transfer.easy)
            }
            for transfer in cancelled {
                guard running.removeValue(forKey: transfer.easy) != nil else { continue }
                curl_multi_remove_handle(handle, transfer.easy)
                transfer.finish(code: nil)
            }
            for transfer in resumed where running[transfer.easy] != nil {
                curl_easy_pause(transfer.easy, 0)  // CURLPAUSE_CONT
            }
            curl_multi_perform(handle, &active)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(handle, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                guard let transfer = running.removeValue(forKey: easy) else { continue }
                curl_multi_remove_handle(handle, easy)
                transfer.finish(code: code)
            }
            let now = DispatchTime.now().uptimeNanoseconds
            for (easy, transfer) in running where transfer.isInactive(now: now) {
                running[easy] = nil
                curl_multi_remove_handle(handle, easy)
                transfer.finish(code: CURLE_OPERATION_TIMEDOUT)
            }
            curl_multi_poll(handle, nil, 0, 500, nil)
        }
        for (easy, transfer) in running {
            curl_multi_remove_handle(handle, easy)
            transfer.finish(code: nil)
        }
        running = [:]
        lock.lock()
        let late = incoming + cancelling
        incoming = []
        cancelling = []
        resuming = []
        curl_multi_cleanup(handle)
        lock.unlock()
        for transfer in late { transfer.finish(code: nil) }
    }
}
