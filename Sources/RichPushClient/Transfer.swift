import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// One HTTP exchange run through a data-task delegate, so a body goes to its destination as it
/// arrives and every refusal is decided, and named, here rather than by the platform.
///
/// Callbacks come on the session's serial delegate queue; `cancel()` comes from any thread, so the
/// state sits behind a lock. The continuation is resumed exactly once, after any partial file is
/// gone. Work that may call back into URL loading (cancelling the task, closing and moving files)
/// runs outside the lock.
final class Transfer: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// What a successful exchange must look like and where its body goes.
    enum Mode: Sendable {
        /// A small body kept in memory; these statuses count as success.
        case json(accepting: ClosedRange<Int>)
        /// A payload image streamed to a file; only 200 counts as success.
        case image(ImageTarget)

        func accepts(_ status: Int) -> Bool {
            switch self {
            case .json(let statuses): statuses.contains(status)
            case .image: status == 200
            }
        }
    }

    /// Where and how large a payload may be.
    struct ImageTarget: Sendable {
        var directory: URL
        var baseName: String
        var maxBytes: Int
    }

    /// What a successful exchange produced.
    struct Reply: Sendable {
        var status: Int
        var body: Data
        var payload: DownloadedPayload?
    }

    /// The most of a JSON answer kept in memory.
    static let memoryLimit = 64 * 1024
    /// The most of a refusal's body read for its problem+json `detail`; a larger one is cut off unread.
    static let problemLimit = 4096

    private struct State {
        var continuation: CheckedContinuation<Reply, any Error>?
        var task: URLSessionDataTask?
        var done = false
        var status: Int?
        /// A status that is not success: the body is read (up to `problemLimit`) for its detail.
        var refusedStatus: Int?
        var expectedLength: Int64 = -1
        /// The JSON answer, the refusal's body, or an image's first bytes until its signature is read.
        var body = Data()
        var received = 0
        var declaredType: ImageType?
        var verifiedType: ImageType?
        var file: FileHandle?
        var partURL: URL?
    }

    /// What finishing needs, taken out of the state under the lock and acted on outside it.
    private struct Ending {
        var continuation: CheckedContinuation<Reply, any Error>?
        var outcome: Result<Reply, any Error>
        var file: FileHandle?
        var partURL: URL?
        var task: URLSessionDataTask?
        var cancelTask: Bool
    }

    private let mode: Mode
    private let timeout: TimeInterval
    private let lock = NSLock()
    private var state = State()

    init(mode: Mode, timeout: TimeInterval) {
        self.mode = mode
        self.timeout = timeout
        super.init()
    }

    /// Starts the exchange in a session of its own; the session lets go of this delegate when the task ends.
    func start(_ request: URLRequest, configuration: ConfigurationBox, continuation: CheckedContinuation<Reply, any Error>) {
        let cancelledAlready = locked { (state) -> Bool in
            if state.done { return true }
            state.continuation = continuation
            return false
        }
        if cancelledAlready {
            continuation.resume(throwing: CancellationError())
            return
        }
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration.make(timeout: timeout), delegate: self, delegateQueue: queue)
        let task = session.dataTask(with: request)
        let stillWanted = locked { (state) -> Bool in
            if state.done { return false }
            state.task = task
            return true
        }
        if stillWanted {
            task.resume()
            session.finishTasksAndInvalidate()
        } else {
            session.invalidateAndCancel()
        }
    }

    /// Stops the exchange for a cancelled Swift task: it throws `CancellationError`.
    func cancel() {
        finish(locked { (state) -> Ending? in
            guard !state.done else { return nil }
            return Self.end(&state, .failure(CancellationError()), cancelTask: true)
        })
    }

    // MARK: URLSessionDataDelegate

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let ending = locked { state in self.receive(response, &state) }
        // swift-corelibs-foundation ignores the disposition; `finish` cancels the task itself.
        completionHandler(ending == nil ? .allow : .cancel)
        finish(ending)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        finish(locked { state in self.receive(data, &state) })
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        finish(locked { state in self.complete(error, &state) })
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        // Credentials and capability URLs go to the server named, not wherever it points: a redirect is a refusal.
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        #if canImport(FoundationNetworking)
        // swift-corelibs-foundation turns a 401 with WWW-Authenticate into this challenge and, under default
        // handling with no stored credential, never completes the task. The 401 and its body were delivered
        // before it on this serial queue: report them, then let the challenge cancel the task.
        let status = (challenge.failureResponse as? HTTPURLResponse)?.statusCode ?? 401
        finish(locked { (state) -> Ending? in
            guard !state.done else { return nil }
            let error = RichPushClientError.http(status: state.refusedStatus ?? status, detail: Self.detail(state.body))
            return Self.end(&state, .failure(error), cancelTask: false)
        })
        completionHandler(.cancelAuthenticationChallenge, nil)
        #else
        completionHandler(.performDefaultHandling, nil)
        #endif
    }

    // MARK: Decisions (under the lock)

    private func receive(_ response: URLResponse, _ state: inout State) -> Ending? {
        guard !state.done else { return nil }
        guard let http = response as? HTTPURLResponse else {
            return Self.end(&state, .failure(RichPushClientError.invalidResponse("the answer is not HTTP")), cancelTask: true)
        }
        state.status = http.statusCode
        state.expectedLength = http.expectedContentLength
        state.body = Data()
        guard mode.accepts(http.statusCode) else {
            state.refusedStatus = http.statusCode
            guard http.expectedContentLength <= Int64(Self.problemLimit) else {
                return Self.end(&state, .failure(RichPushClientError.http(status: http.statusCode)), cancelTask: true)
            }
            return nil
        }
        guard case .image(let target) = mode else { return nil }
        if http.expectedContentLength > Int64(target.maxBytes) {
            return Self.end(&state, .failure(RichPushClientError.tooLarge(limit: target.maxBytes, size: http.expectedContentLength)), cancelTask: true)
        }
        let contentType = Self.header("Content-Type", of: http)
        guard let declared = ImageType(contentType: contentType) else {
            let reason = "the server sent Content-Type \(contentType ?? "(none)"), not image/png, image/jpeg or image/gif"
            return Self.end(&state, .failure(RichPushClientError.notAnImage(reason)), cancelTask: true)
        }
        state.declaredType = declared
        let part = target.directory.appendingPathComponent(target.baseName + ".part")
        guard FileManager.default.createFile(atPath: part.path, contents: nil) else {
            let error = RichPushClientError.fileSystem("create", path: part.path, reason: "the file could not be created")
            return Self.end(&state, .failure(error), cancelTask: true)
        }
        state.partURL = part
        do {
            state.file = try FileHandle(forWritingTo: part)
        } catch {
            return Self.end(&state, .failure(RichPushClientError.fileSystem("open", path: part.path, reason: "\(error)")), cancelTask: true)
        }
        return nil
    }

    private func receive(_ data: Data, _ state: inout State) -> Ending? {
        guard !state.done, state.status != nil else { return nil }
        if let refused = state.refusedStatus {
            state.body.append(data)
            guard state.body.count <= Self.problemLimit else {
                return Self.end(&state, .failure(RichPushClientError.http(status: refused)), cancelTask: true)
            }
            return nil
        }
        guard case .image(let target) = mode else {
            state.body.append(data)
            guard state.body.count <= Self.memoryLimit else {
                let error = RichPushClientError.invalidResponse("the answer is over \(Self.memoryLimit) bytes")
                return Self.end(&state, .failure(error), cancelTask: true)
            }
            return nil
        }
        state.received += data.count
        guard state.received <= target.maxBytes else {
            return Self.end(&state, .failure(RichPushClientError.tooLarge(limit: target.maxBytes)), cancelTask: true)
        }
        if state.verifiedType != nil { return Self.write(data, &state) }
        state.body.append(data)
        return Self.verify(&state, complete: false)
    }

    private func complete(_ error: (any Error)?, _ state: inout State) -> Ending? {
        guard !state.done else { return nil }
        if let refused = state.refusedStatus {
            let error = RichPushClientError.http(status: refused, detail: Self.detail(state.body))
            return Self.end(&state, .failure(error), cancelTask: false)
        }
        if let error {
            return Self.end(&state, .failure(RichPushClientError.transport(describe(error))), cancelTask: false)
        }
        guard let status = state.status else {
            return Self.end(&state, .failure(RichPushClientError.invalidResponse("the server sent no response")), cancelTask: false)
        }
        guard case .image(let target) = mode else {
            let reply = Reply(status: status, body: state.body, payload: nil)
            return Self.end(&state, .success(reply), cancelTask: false)
        }
        if state.verifiedType == nil, let refusal = Self.verify(&state, complete: true) { return refusal }
        guard let type = state.verifiedType else {
            return Self.end(&state, .failure(RichPushClientError.notAnImage("the body is empty")), cancelTask: false)
        }
        if state.expectedLength >= 0, Int64(state.received) < state.expectedLength {
            let error = RichPushClientError.invalidResponse("the body ended after \(state.received) of \(state.expectedLength) bytes")
            return Self.end(&state, .failure(error), cancelTask: false)
        }
        let fileURL = target.directory.appendingPathComponent("\(target.baseName).\(type.fileExtension)")
        let payload = DownloadedPayload(fileURL: fileURL, contentType: type.mediaType, size: state.received)
        return Self.end(&state, .success(Reply(status: status, body: Data(), payload: payload)), cancelTask: false)
    }

    /// Checks the signature in `state.body` against the declared type; once decided, writes those first bytes out.
    private static func verify(_ state: inout State, complete: Bool) -> Ending? {
        switch ImageType.sniff(state.body, complete: complete) {
        case .undecided:
            return nil
        case .notAnImage:
            let seen = state.body.isEmpty ? "the body is empty" : "it starts with bytes \(ImageType.hex(state.body))"
            return end(&state, .failure(RichPushClientError.notAnImage(seen)), cancelTask: true)
        case .image(let type):
            guard type == state.declaredType else {
                let declared = state.declaredType?.mediaType ?? "nothing"
                let reason = "the server declared \(declared) but the bytes are \(type.mediaType)"
                return end(&state, .failure(RichPushClientError.notAnImage(reason)), cancelTask: true)
            }
            state.verifiedType = type
            let head = state.body
            state.body = Data()
            return write(head, &state)
        }
    }

    private static func write(_ data: Data, _ state: inout State) -> Ending? {
        do {
            try state.file?.write(contentsOf: data)
            return nil
        } catch {
            let failure = RichPushClientError.fileSystem("write", path: state.partURL?.path ?? "the payload file", reason: "\(error)")
            return end(&state, .failure(failure), cancelTask: true)
        }
    }

    /// Marks the exchange done and takes what finishing needs out of the state.
    private static func end(_ state: inout State, _ outcome: Result<Reply, any Error>, cancelTask: Bool) -> Ending {
        let ending = Ending(continuation: state.continuation, outcome: outcome, file: state.file, partURL: state.partURL,
                            task: state.task, cancelTask: cancelTask)
        state.done = true
        state.continuation = nil
        state.file = nil
        state.task = nil
        return ending
    }

    // MARK: Finishing (outside the lock)

    private func finish(_ ending: Ending?) {
        guard let ending else { return }
        if ending.cancelTask { ending.task?.cancel() }
        var outcome = ending.outcome
        if let file = ending.file {
            do {
                try file.close()
            } catch {
                if case .success = outcome {
                    outcome = .failure(RichPushClientError.fileSystem("write", path: ending.partURL?.path ?? "the payload file", reason: "\(error)"))
                }
            }
        }
        if let part = ending.partURL {
            if case .success(let reply) = outcome, let payload = reply.payload {
                do {
                    try FileManager.default.moveItem(at: part, to: payload.fileURL)
                } catch {
                    outcome = .failure(RichPushClientError.fileSystem("move the payload to", path: payload.fileURL.path, reason: "\(error)"))
                    try? FileManager.default.removeItem(at: part)
                }
            } else {
                try? FileManager.default.removeItem(at: part)
            }
        }
        ending.continuation?.resume(with: outcome)
    }

    // MARK: Helpers

    private func locked<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    private func describe(_ error: any Error) -> String {
        guard let urlError = error as? URLError else { return "\(error)" }
        switch urlError.code {
        case .timedOut: return "no complete answer within \(Int(timeout)) seconds"
        case .cannotConnectToHost: return "the server refused the connection"
        case .cannotFindHost: return "the server's host name does not resolve"
        case .notConnectedToInternet: return "the device is offline"
        default: return "\(urlError.localizedDescription) (URLError \(urlError.code.rawValue))"
        }
    }

    /// The `detail` of a problem+json body, shortened for a message.
    private static func detail(_ body: Data) -> String? {
        guard !body.isEmpty, body.count <= problemLimit,
              let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let detail = object["detail"] as? String else { return nil }
        return String(detail.prefix(300))
    }

    /// A response header by name, in any case (`allHeaderFields` keeps the server's spelling on some platforms).
    private static func header(_ name: String, of response: HTTPURLResponse) -> String? {
        let wanted = name.lowercased()
        for (key, value) in response.allHeaderFields {
            if let key = key as? String, key.lowercased() == wanted { return value as? String }
        }
        return nil
    }
}
