import CCurl
import CShims
import Foundation

/// One request on one curl easy handle: its configuration, what libcurl's callbacks
/// deliver (the head, the body whole, or pieces of it: lines or chunks) and how it ends.
/// The transfer loop's thread drives the handle; readers on other threads touch only
/// what `lock` guards.
final class Transfer: @unchecked Sendable {
    enum Mode {
        case buffered
        /// The body is read line by line (`StreamingResponse.Framing.lines`).
        case lines
        /// The body is read in chunks as they arrive (`StreamingResponse.Framing.chunks`).
        case chunks
    }

    let mode: Mode
    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The request's body, which libcurl reads from where it is (`CURLOPT_POSTFIELDS`).
    private var requestBody: [UInt8] = []
    fileprivate var upload: UploadBodyReader?
    private let bufferLimit: Int
    /// Chunks received while the reader is behind are joined up to this size.
    private static let chunkSize = 256 * 1024
    /// The most a `Content-Length` makes a buffered transfer set aside before its body arrives.
    private static let reservedBodyLimit = 64 * 1024 * 1024

    private let lock = NSLock()
    private var status = 0
    private var headers: [(name: String, value: String)] = []
    private var headDelivered = false
    private var body: [UInt8] = []
    /// Lines or chunks received and not yet read (streaming modes).
    private var pieces: [[UInt8]] = []
    private var pieceIndex = 0
    private var partialLine: [UInt8] = []
    private var queuedBytes = 0
    private var paused = false
    private var ended = false
    private var failure: HTTPClientError?
    private var pieceWaiter: CheckedContinuation<[UInt8]?, Error>?
    private var cancellationRequested = false
    /// Nanoseconds without a byte either way after which the transfer is abandoned.
    private let inactivityLimit: UInt64
    /// When a byte last moved, or a pause ended (guarded by `lock`): libcurl's own low-speed
    /// check averages over several seconds, so a stall after a burst was noticed seconds late.
    private var lastActivity: UInt64 = 0

    /// Set before submission: the whole response (buffered mode).
    var onComplete: (@Sendable (Result<HTTPClient.Response, Error>) -> Void)?
    /// Set before submission: the head arrived, or the transfer failed before it (streaming mode).
    var onHead: (@Sendable (Result<Void, Error>) -> Void)?

    init(request: HTTPClient.Request, configuration: HTTPClientConfiguration, mode: Mode) throws(HTTPClientError) {
        guard let easy = curl_easy_init() else { throw .invalidRequest("cannot create a curl handle") }
        self.easy = easy
        self.mode = mode
        bufferLimit = configuration.streamBufferLimit
        let seconds = UInt64(max(1, request.inactivityTimeoutSeconds ?? configuration.inactivityTimeoutSeconds))
        let (limit, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        inactivityLimit = overflow ? UInt64.max : limit
        configure(request, configuration)
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
    }

    private func configure(_ request: HTTPClient.Request, _ configuration: HTTPClientConfiguration) {
        _ = couchette_curl_set_string(easy, CURLOPT_URL, request.url)
        // Document IDs "." and ".." are path segments of their own, not directions to libcurl.
        _ = couchette_curl_set_long(easy, CURLOPT_PATH_AS_IS, 1)
        _ = couchette_curl_set_long(easy, CURLOPT_NOSIGNAL, 1)
        if request.keepsContentEncoding { _ = couchette_curl_set_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0) }
        _ = couchette_curl_set_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        _ = couchette_curl_set_long(easy, CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeoutMilliseconds)
        // No CURLOPT_LOW_SPEED_*: the transfer loop ends inactive transfers itself (`isInactive`).
        _ = couchette_curl_set_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        _ = couchette_curl_set_string(easy, CURLOPT_USERAGENT, configuration.userAgent)
        if let timeout = request.timeoutMilliseconds {
            _ = couchette_curl_set_long(easy, CURLOPT_TIMEOUT_MS, timeout)
        }

        let method = request.method.uppercased()
        switch method {
        case "GET": _ = couchette_curl_set_long(easy, CURLOPT_HTTPGET, 1)
        case "HEAD": _ = couchette_curl_set_long(easy, CURLOPT_NOBODY, 1)
        case "POST": _ = couchette_curl_set_long(easy, CURLOPT_POST, 1)
        default: _ = couchette_curl_set_string(easy, CURLOPT_CUSTOMREQUEST, method)
        }
        if let upload = request.upload {
            let reader = UploadBodyReader(upload)
            self.upload = reader
            if method == "POST" {
                _ = couchette_curl_set_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(reader.length))
            } else {
                _ = couchette_curl_set_long(easy, CURLOPT_UPLOAD, 1)
                _ = couchette_curl_set_offset(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(reader.length))
            }
            let context = Unmanaged.passUnretained(self).toOpaque()
            _ = couchette_curl_set_pointer(easy, CURLOPT_READFUNCTION, unsafeBitCast(readCallback, to: UnsafeMutableRawPointer.self))
            _ = couchette_curl_set_pointer(easy, CURLOPT_READDATA, context)
            _ = couchette_curl_set_pointer(easy, CURLOPT_SEEKFUNCTION, unsafeBitCast(seekCallback, to: UnsafeMutableRawPointer.self))
            _ = couchette_curl_set_pointer(easy, CURLOPT_SEEKDATA, context)
        } else if let body = request.body ?? (method == "POST" || method == "PUT" ? [] : nil) {
            // Kept, not copied (a replication batch's body is megabytes): a stored array that is
            // never mutated keeps its storage where it is.
            requestBody = body.isEmpty ? [0] : body   // an empty body still needs an address
            let address = requestBody.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
            _ = couchette_curl_set_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
            _ = couchette_curl_set_pointer(easy, CURLOPT_POSTFIELDS, address)
        }

        // "Expect:" turns off curl's 100-continue round trip before larger bodies.
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Expect:")
        for (name, value) in request.headers {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        headerList = list
        _ = couchette_curl_set_pointer(easy, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))

        if let caFile = request.tls.caFile { _ = couchette_curl_set_string(easy, CURLOPT_CAINFO, caFile) }
        if let pinned = request.tls.pinnedPublicKey {
            _ = couchette_curl_set_string(easy, CURLOPT_PINNEDPUBLICKEY, pinned)
        }
        if !request.tls.verifyPeer {
            _ = couchette_curl_set_long(easy, CURLOPT_SSL_VERIFYPEER, 0)
            _ = couchette_curl_set_long(easy, CURLOPT_SSL_VERIFYHOST, 0)
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = couchette_curl_set_pointer(easy, CURLOPT_WRITEFUNCTION, unsafeBitCast(writeCallback, to: UnsafeMutableRawPointer.self))
        _ = couchette_curl_set_pointer(easy, CURLOPT_WRITEDATA, context)
        _ = couchette_curl_set_pointer(easy, CURLOPT_HEADERFUNCTION, unsafeBitCast(headerCallback, to: UnsafeMutableRawPointer.self))
        _ = couchette_curl_set_pointer(easy, CURLOPT_HEADERDATA, context)
    }

    // MARK: - Callbacks (transfer loop thread)

    /// A byte moved, or the transfer started (loop thread).
    func noteActivity() {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.withLock { lastActivity = now }
    }

    /// Whether nothing moved for the inactivity limit (loop thread). A transfer paused
    /// because its reader lags is waiting for us, not for the peer; its time starts again
    /// when the reader catches up.
    func isInactive(now: UInt64) -> Bool {
        lock.withLock { !paused && now > lastActivity && now - lastActivity > inactivityLimit }
    }

    fileprivate func receiveHeader(_ bytes: UnsafeRawBufferPointer) {
        noteActivity()
        var line = Substring(String(decoding: bytes, as: UTF8.self))
        while let last = line.last, last.isNewline { line.removeLast() }
        var deliverHead = false
        lock.lock()
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            headers = []
        } else if line.isEmpty {
            if status >= 200 && mode != .buffered && !headDelivered {
                headDelivered = true
                deliverHead = true
            }
        } else if let colon = line.firstIndex(of: ":") {
            let name = String(line[..<colon])
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
            if mode == .buffered, name.lowercased() == "content-length", let length = Int(value), length > 0 {
                // Room for the whole body at once: grown by doubling, a batch of megabytes was
                // copied and its pages faulted in about twice.
                body.reserveCapacity(min(length, Self.reservedBodyLimit))
            }
        }
        let onHead = deliverHead ? self.onHead : nil
        lock.unlock()
        onHead?(.success(()))
    }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        noteActivity()
        switch mode {
        case .buffered:
            body.append(contentsOf: bytes)
            return bytes.count
        case .chunks:
            lock.lock()
            if queuedBytes >= bufferLimit {
                paused = true
                lock.unlock()
                return Int(CURL_WRITEFUNC_PAUSE)
            }
            if pieceIndex < pieces.count, pieces[pieces.count - 1].count < Self.chunkSize {
                pieces[pieces.count - 1].append(contentsOf: bytes)
            } else {
                pieces.append(Array(bytes))
            }
            queuedBytes += bytes.count
            let handOff = takePieceForWaiter()
            lock.unlock()
            handOff?()
            return bytes.count
        case .lines:
            lock.lock()
            if queuedBytes >= bufferLimit {
                paused = true
                lock.unlock()
                return Int(CURL_WRITEFUNC_PAUSE)
            }
            var start = 0
            while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
                var line = partialLine
                line.append(contentsOf: bytes[start..<newline])
                partialLine.removeAll(keepingCapacity: true)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                queuedBytes += line.count + 1
                pieces.append(line)
                start = newline + 1
            }
            partialLine.append(contentsOf: bytes[start...])
            let handOff = takePieceForWaiter()
            lock.unlock()
            handOff?()
            return bytes.count
        }
    }

    /// Ends the transfer (loop thread): with curl's result code, or as cancelled.
    func finish(code: CURLcode?) {
        let error: HTTPClientError? = code.map { $0 == CURLE_OK ? nil : HTTPClientError(code: $0) } ?? .cancelled
        lock.lock()
        if ended {
            lock.unlock()
            return
        }
        ended = true
        failure = error
        if status == 0 && error == nil {
            var code = 0
            _ = couchette_curl_get_long(easy, CURLINFO_RESPONSE_CODE, &code)
            status = code
        }
        if !partialLine.isEmpty {
            pieces.append(partialLine)
            partialLine = []
        }
        let response = HTTPClient.Response(status: status, headers: headers, body: body)
        body = []
        let onHead = headDelivered ? nil : self.onHead
        headDelivered = true
        let onComplete = self.onComplete
        self.onComplete = nil
        self.onHead = nil
        let handOff = takePieceForWaiter()
        lock.unlock()

        switch mode {
        case .buffered:
            if let error { onComplete?(.failure(error)) } else { onComplete?(.success(response)) }
        case .lines, .chunks:
            if let error { onHead?(.failure(error)) } else { onHead?(.success(())) }
            handOff?()
        }
    }

    func requestCancellation() {
        lock.lock()
        cancellationRequested = true
        lock.unlock()
    }

    /// Read by the transfer loop while the requester may be setting it (ThreadSanitizer).
    var cancelRequested: Bool {
        lock.lock()
        defer { lock.unlock() }
        return cancellationRequested
    }

    // MARK: - Reading (streaming modes, any thread)

    var responseStatus: Int {
        lock.lock()
        defer { lock.unlock() }
        return status
    }

    var responseHeaders: [(name: String, value: String)] {
        lock.lock()
        defer { lock.unlock() }
        return headers
    }

    enum PieceAvailability {
        case piece([UInt8])
        case pending
        case end
        case failed(HTTPClientError)
    }

    /// The next line or chunk if one is buffered, without waiting. Returns whether the
    /// transfer should be unpaused too.
    func availablePiece() -> (PieceAvailability, resume: Bool) {
        lock.lock()
        defer { lock.unlock() }
        if pieceIndex < pieces.count { return (.piece(popPiece()), shouldResume()) }
        if ended { return (failure.map { .failed($0) } ?? .end, false) }
        return (.pending, false)
    }

    /// Waits for the next line or chunk; nil at the end of the body.
    func waitForPiece() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            if pieceIndex < pieces.count {
                let line = popPiece()
                lock.unlock()
                continuation.resume(returning: line)
            } else if ended {
                let failure = self.failure
                lock.unlock()
                if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: nil) }
            } else {
                pieceWaiter = continuation
                lock.unlock()
            }
        }
    }

    /// Whether the reader has drained enough for a paused transfer to go on (consumes the flag).
    func shouldResume() -> Bool {
        guard paused, queuedBytes <= bufferLimit / 2 else { return false }
        paused = false
        lastActivity = DispatchTime.now().uptimeNanoseconds
        return true
    }

    func shouldResumeLocked() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return shouldResume()
    }

    private func popPiece() -> [UInt8] {
        let line = pieces[pieceIndex]
        pieces[pieceIndex] = []  // read pieces are dropped at once, not when the array is compacted
        pieceIndex += 1
        queuedBytes -= line.count + (mode == .lines ? 1 : 0)
        if pieceIndex > 1024 && pieceIndex * 2 > pieces.count {
            pieces.removeFirst(pieceIndex)
            pieceIndex = 0
        }
        return line
    }

    /// With the lock held: if a reader waits and a piece (or the end) is there, the work
    /// to hand it over, to run after unlocking.
    private func takePieceForWaiter() -> (() -> Void)? {
        guard let waiter = pieceWaiter else { return nil }
        if pieceIndex < pieces.count {
            pieceWaiter = nil
            let line = popPiece()
            return { waiter.resume(returning: line) }
        }
        if ended {
            pieceWaiter = nil
            let failure = self.failure
            return { if let failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) } }
        }
        return nil
    }
}

// libcurl's callbacks; the context is the transfer, kept alive by the loop while it runs.

private let writeCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

private let headerCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

private let readCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
    buffer, size, count, context in
    guard let context, let buffer else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    guard let reader = transfer.upload,
          let filled = reader.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count)) else {
        return Int(CURL_READFUNC_ABORT)
    }
    transfer.noteActivity()
    return filled
}

/// libcurl rewinds an upload to send it again (after a redirect or an authentication round).
private let seekCallback: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = {
    context, offset, origin in
    guard let context, offset == 0, origin == SEEK_SET else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    transfer.upload?.rewind()
    return 0  // CURL_SEEKFUNC_OK
}
