import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// The device side of RichPush's HTTP API: device sessions, and payload downloads that a
/// Notification Service Extension can afford.
///
/// Every request runs through its own `URLSession` with a delegate, so a payload streams to disk
/// as it arrives (never whole in memory: an extension has about 24 MB) and each refusal (status,
/// size, type, magic bytes) is decided here, with the transfer cancelled at once and no partial
/// file left behind. It depends on Foundation alone, so an app and its extensions can share it.
public final class RichPushClient: Sendable {
    /// How the client proves who it is to the API.
    public enum Credentials: Sendable, Equatable {
        /// HTTP Basic with a user name and password, as the tutorial's device app sends them.
        case basic(user: String, password: String)
        /// A device session's token (`Authorization: Bearer <token>`), from `createSession`.
        case bearer(String)

        var headerValue: String {
            switch self {
            case .basic(let user, let password): "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            case .bearer(let token): "Bearer \(token)"
            }
        }
    }

    /// A device session (SPEC §9): a token that stands for the user's password until it expires or is revoked.
    ///
    /// Keep the token in the keychain, shared with the extension through an access group, instead of the password.
    public struct Session: Sendable, Equatable {
        /// The bearer token; the server keeps only a hash of it, so it cannot be shown again.
        public var token: String
        /// When the server stops accepting the token.
        public var expires: Date

        /// Creates a session from its parts.
        public init(token: String, expires: Date) {
            self.token = token
            self.expires = expires
        }

        /// Reads the server's answer to `POST /api/sessions`, `{"token","expires"}`.
        ///
        /// `expires` is ISO 8601 with or without fractional seconds (`2027-02-20T10:00:00Z`,
        /// `2027-02-20T10:00:00.123Z`).
        /// - Throws: `RichPushClientError` of kind `.invalidResponse` when either field is missing or malformed.
        public init(json: Data) throws {
            guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any],
                  let token = object["token"] as? String, !token.isEmpty, let expires = object["expires"] as? String else {
                throw RichPushClientError.invalidResponse("a new session should be a JSON object {\"token\",\"expires\"}")
            }
            guard let date = Self.date(iso8601: expires) else {
                throw RichPushClientError.invalidResponse("the session's expiry \"\(expires.prefix(40))\" is not an ISO 8601 date")
            }
            self.init(token: token, expires: date)
        }

        private static func date(iso8601 text: String) -> Date? {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = formatter.date(from: text) { return date }
            formatter.formatOptions = [.withInternetDateTime]
            return formatter.date(from: text)
        }
    }

    /// The server, e.g. `https://push.example.com`; API paths are appended to it.
    public let baseURL: URL
    /// What the client sends to the API; nil sends nothing (enough for a payload URL).
    public let credentials: Credentials?
    private let configuration: ConfigurationBox

    /// Creates a client of the server at `baseURL`.
    ///
    /// `configuration` is copied; whatever it says, each request gets the per-call timeout and runs
    /// without a URL cache or stored credentials (payloads are private, credentials are explicit).
    public init(baseURL: URL, credentials: Credentials? = nil, configuration: URLSessionConfiguration = .ephemeral) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.configuration = ConfigurationBox(configuration)
    }

    private init(baseURL: URL, credentials: Credentials?, box: ConfigurationBox) {
        self.baseURL = baseURL
        self.credentials = credentials
        self.configuration = box
    }

    /// The same client sending other credentials, e.g. `.bearer(session.token)` after `createSession`.
    public func with(credentials: Credentials?) -> RichPushClient {
        RichPushClient(baseURL: baseURL, credentials: credentials, box: configuration)
    }

    /// Exchanges a user's password for a device session: `POST /api/sessions` with Basic credentials.
    ///
    /// The client's own credentials are not used. Pass `session.token` to `with(credentials: .bearer(_))`.
    /// - Throws: `RichPushClientError`: `.http(status: 401)` for a wrong user or password,
    ///   `.transport`, or `.invalidResponse`; `CancellationError` when the task is cancelled.
    public func createSession(user: String, password: String, timeout: TimeInterval = 25) async throws -> Session {
        var request = Self.request("POST", endpoint("api/sessions"), credentials: .basic(user: user, password: password),
                                   accept: "application/json", timeout: timeout)
        request.httpBody = Data()
        let reply = try await exchange(request, .json(accepting: 200...201), timeout: timeout)
        return try Session(json: reply.body)
    }

    /// Revokes the session whose token the client sends: `DELETE /api/sessions/current`.
    ///
    /// Call it on sign-out; the token stops working everywhere at once.
    /// - Throws: `RichPushClientError` (`.http(status: 401)` when the token was already dead),
    ///   or `CancellationError`.
    public func revokeSession(timeout: TimeInterval = 25) async throws {
        let request = Self.request("DELETE", endpoint("api/sessions/current"), credentials: credentials,
                                   accept: "application/json", timeout: timeout)
        _ = try await exchange(request, .json(accepting: 200...299), timeout: timeout)
    }

    /// Reports that the user opened (tapped) `message` (SPEC §20): `POST <payloadURL>/opened` with
    /// no credentials when the push carried a payload URL, else `POST /api/notifications/{id}/opened`
    /// with the client's. The server counts it once however often it is reported; call it from
    /// `userNotificationCenter(_:didReceive:withCompletionHandler:)`.
    /// - Throws: `RichPushClientError` (`.http(status: 404)` for a notification that is not this
    ///   user's or is gone), or `CancellationError`.
    public func reportOpened(_ message: RichPushMessage, timeout: TimeInterval = 25) async throws {
        let request: URLRequest
        if let link = message.payloadURL {
            var url = link
            url.appendPathComponent("opened")
            request = Self.request("POST", url, credentials: nil, accept: "application/json", timeout: timeout)
        } else {
            request = Self.request("POST", endpoint("api/notifications/\(message.id)/opened"), credentials: credentials,
                                   accept: "application/json", timeout: timeout)
        }
        var body = request
        body.httpBody = Data()
        _ = try await exchange(body, .json(accepting: 200...299), timeout: timeout)
    }

    /// Downloads the payload image of `message` into a new file in `directory`.
    ///
    /// With a `payloadURL` (an alert push's `richUrl`) the URL is fetched with no credentials: it is
    /// a capability of its own. Otherwise `GET /api/notifications/{id}` is fetched with the client's
    /// credentials. Either way the server marks the notification read. The body is written to disk
    /// as it arrives and refused, with the transfer cancelled, as soon as the status is not 200, the
    /// size passes `maxBytes`, the `Content-Type` is not `image/png`, `image/jpeg` or `image/gif`, or the first
    /// bytes are not that type's signature. The file is named `<richId>-<random>.png`, `.jpg` or `.gif` by
    /// the verified type, as `UNNotificationAttachment` requires; on any failure nothing is left.
    ///
    /// `variant` asks for an image made for the purpose (SPEC §16): `.push` is a JPEG of at most
    /// 1 MB and 2048 px, what a Notification Service Extension's 24 MB can decode; `.thumb` fits
    /// 320×320.
    ///
    /// `timeout` bounds the whole exchange; a Notification Service Extension has about 30 seconds.
    /// - Throws: `RichPushClientError` (`.http(status:)`, `.tooLarge`, `.notAnImage`, `.transport`,
    ///   `.invalidResponse`, `.fileSystem`), or `CancellationError` when the task is cancelled.
    public func downloadPayload(for message: RichPushMessage, into directory: URL, maxBytes: Int = 10 * 1024 * 1024,
                                variant: PayloadVariant = .original, timeout: TimeInterval = 25) async throws -> DownloadedPayload {
        var url = message.payloadURL ?? endpoint("api/notifications/\(message.id)")
        if variant != .original, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            parts.queryItems = (parts.queryItems ?? []) + [URLQueryItem(name: "variant", value: variant.rawValue)]
            url = parts.url ?? url
        }
        let request = Self.request("GET", url, credentials: message.payloadURL == nil ? credentials : nil,
                                   accept: "image/png, image/jpeg, image/gif", timeout: timeout)
        let name = "\(message.id)-\(String(UInt64.random(in: .min ... .max), radix: 36))"
        let target = Transfer.ImageTarget(directory: directory, baseName: name, maxBytes: maxBytes)
        let reply = try await exchange(request, .image(target), timeout: timeout)
        guard let payload = reply.payload else { throw RichPushClientError.invalidResponse("the download produced no file") }
        return payload
    }

    private func endpoint(_ path: String) -> URL { baseURL.appendingPathComponent(path) }

    private static func request(_ method: String, _ url: URL, credentials: Credentials?, accept: String, timeout: TimeInterval) -> URLRequest {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout)
        request.httpMethod = method
        request.setValue(accept, forHTTPHeaderField: "Accept")
        if let credentials { request.setValue(credentials.headerValue, forHTTPHeaderField: "Authorization") }
        return request
    }

    private func exchange(_ request: URLRequest, _ mode: Transfer.Mode, timeout: TimeInterval) async throws -> Transfer.Reply {
        let transfer = Transfer(mode: mode, timeout: timeout)
        let configuration = self.configuration
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Transfer.Reply, any Error>) in
                transfer.start(request, configuration: configuration, continuation: continuation)
            }
        } onCancel: {
            transfer.cancel()
        }
    }
}

/// Which image of a payload to download (SPEC §16).
public enum PayloadVariant: String, Sendable {
    /// The image as stored.
    case original
    /// A JPEG of at most 1 MB and 2048 px on its long side, upright.
    case push
    /// An image that fits 320×320, upright.
    case thumb
}

/// A payload image saved to a file and verified to be the PNG, JPEG or GIF its name says.
public struct DownloadedPayload: Sendable, Equatable {
    /// The file, `<richId>-<random>.png`, `.jpg` or `.gif` in the directory given; the caller owns it
    /// (iOS moves it away when it becomes a notification attachment).
    public var fileURL: URL
    /// `image/png`, `image/jpeg` or `image/gif`: what the server declared and the first bytes confirmed.
    public var contentType: String
    /// The file's size in bytes.
    public var size: Int

    /// Creates a payload record from its parts.
    public init(fileURL: URL, contentType: String, size: Int) {
        self.fileURL = fileURL
        self.contentType = contentType
        self.size = size
    }
}

/// The caller's session configuration, copied once and never mutated, so the client is `Sendable`
/// whether or not this platform's Foundation marks `URLSessionConfiguration` so.
final class ConfigurationBox: @unchecked Sendable {
    private let configuration: URLSessionConfiguration

    init(_ configuration: URLSessionConfiguration) {
        self.configuration = configuration.copy() as! URLSessionConfiguration
    }

    /// A fresh copy for one exchange.
    func make(timeout: TimeInterval) -> URLSessionConfiguration {
        let copy = configuration.copy() as! URLSessionConfiguration
        copy.timeoutIntervalForRequest = timeout
        copy.timeoutIntervalForResource = timeout
        copy.requestCachePolicy = .reloadIgnoringLocalCacheData
        copy.urlCache = nil
        // Credentials travel in the Authorization header we set; a stored one must not answer a 401 for us.
        copy.urlCredentialStorage = nil
        return copy
    }
}

/// The payload types (PNG, JPEG, and GIF since SPEC §22), by declared media type and by signature.
enum ImageType: Sendable, Equatable {
    case png, jpeg, gif

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let jpegSignature: [UInt8] = [0xFF, 0xD8, 0xFF]
    static let gifSignatures: [[UInt8]] = [Array("GIF87a".utf8), Array("GIF89a".utf8)]

    /// What the first bytes of a body say, so far.
    enum Sniffed: Sendable, Equatable {
        case undecided
        case notAnImage
        case image(ImageType)
    }

    var mediaType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .gif: "image/gif"
        }
    }
    var fileExtension: String {
        switch self {
        case .png: "png"
        case .jpeg: "jpg"
        case .gif: "gif"
        }
    }

    /// The type a `Content-Type` value names (parameters and case ignored); nil for anything else.
    init?(contentType: String?) {
        let essence = contentType?.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        switch essence ?? "" {
        case "image/png": self = .png
        case "image/jpeg": self = .jpeg
        case "image/gif": self = .gif
        default: return nil
        }
    }

    /// Reads the signature at the start of `head`; with `complete` the body has ended, so a
    /// prefix too short to decide is not an image.
    static func sniff(_ head: Data, complete: Bool) -> Sniffed {
        let bytes = [UInt8](head.prefix(pngSignature.count))
        if bytes.starts(with: jpegSignature) { return .image(.jpeg) }
        if bytes.starts(with: pngSignature) { return .image(.png) }
        if gifSignatures.contains(where: { bytes.starts(with: $0) }) { return .image(.gif) }
        let couldStillBe = pngSignature.starts(with: bytes) || jpegSignature.starts(with: bytes) || gifSignatures.contains { $0.starts(with: bytes) }
        return couldStillBe && !complete ? .undecided : .notAnImage
    }

    static func hex(_ head: Data) -> String {
        head.prefix(8).map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: " ")
    }
}

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

#if canImport(UserNotifications)
extension DownloadedPayload {
    /// An attachment that shows this image in the notification.
    ///
    /// iOS moves the file into its own store when the content is delivered, and reads its type from
    /// the file extension, which is why the file is named by the verified type.
    public func notificationAttachment(identifier: String = "richpush-image") throws -> UNNotificationAttachment {
        try UNNotificationAttachment(identifier: identifier, url: fileURL, options: nil)
    }
}

extension RichPushClient {
    /// Downloads the image a push names and attaches it to `content`: what a Notification Service
    /// Extension's `didReceive(_:withContentHandler:)` awaits before calling its content handler.
    ///
    /// It never throws: when the push is not RichPush's, or the download fails or passes `timeout`,
    /// `content` is left as it came and the alert shows without an image. A push with a `richUrl`
    /// needs no credentials; one without is fetched through the API with `credentials`.
    /// - Returns: whether an image was attached.
    @discardableResult
    public static func attachPayload(to content: UNMutableNotificationContent, baseURL: URL, credentials: Credentials? = nil,
                                     maxBytes: Int = 10 * 1024 * 1024, timeout: TimeInterval = 25) async -> Bool {
        guard let message = try? RichPushMessage(userInfo: content.userInfo) else { return false }
        let client = RichPushClient(baseURL: baseURL, credentials: credentials)
        // The push variant: a 12 MP original decoded for display takes 48 MB, twice what an extension may use.
        guard let payload = try? await client.downloadPayload(for: message, into: FileManager.default.temporaryDirectory,
                                                               maxBytes: maxBytes, variant: .push, timeout: timeout) else { return false }
        do {
            content.attachments = [try payload.notificationAttachment()]
            return true
        } catch {
            try? FileManager.default.removeItem(at: payload.fileURL)
            return false
        }
    }
}
#endif
