/// Why the device side of RichPush refused a push or a download, with words a person can act on.
///
/// Compare `kind` to branch (`error.kind == .http(status: 401)` means the credentials or the
/// session token are no longer good); show `message` to a developer or put it in a log.
public struct RichPushClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of a failure.
    public enum Kind: Sendable, Equatable {
        /// The push is not one of RichPush's (no usable `richId`), or a field of it is malformed.
        case notRichPush
        /// The payload is larger than the caller's `maxBytes`, by its `Content-Length` or by the bytes that came.
        case tooLarge
        /// The answer is not a PNG, JPEG or GIF: wrong `Content-Type`, or bytes that do not start like one.
        case notAnImage
        /// The server answered with this status instead of success.
        case http(status: Int)
        /// The server could not be reached, or the exchange broke off or timed out.
        case transport
        /// The server answered something this library cannot read (not HTTP, bad JSON, a short body).
        case invalidResponse
        /// The downloaded file could not be written, moved or created in the directory given.
        case fileSystem
        /// A call that names the device was made by a client that has no registration id.
        case noRegistration
    }

    /// What kind of failure this is.
    public let kind: Kind
    /// What went wrong and, where there is one, what to do about it.
    public let message: String

    private init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The push is not RichPush's or carries a malformed field; `reason` names the field.
    public static func notRichPush(_ reason: String) -> Self { .init(.notRichPush, "not a RichPush notification: \(reason)") }

    /// The payload exceeds `limit` bytes (`size` when the server declared it).
    public static func tooLarge(limit: Int, size: Int64? = nil) -> Self {
        let what = size.map { "the payload is \($0) bytes" } ?? "the payload is larger than that"
        return .init(.tooLarge, "\(what); the limit is \(limit) bytes (raise maxBytes, or send a smaller image or the push variant)")
    }

    /// The answer is not a PNG, JPEG or GIF; `reason` says what was seen.
    public static func notAnImage(_ reason: String) -> Self { .init(.notAnImage, "the payload is not a PNG, JPEG or GIF image: \(reason)") }

    /// The server answered `status`; `detail` is the problem+json `detail` it sent, when it sent one.
    public static func http(status: Int, detail: String? = nil) -> Self {
        var text = "the server answered HTTP \(status)"
        if let detail, !detail.isEmpty { text += ": \(detail)" }
        if let hint = hint(status) { text += " (\(hint))" }
        return .init(.http(status: status), text)
    }

    /// The exchange failed below HTTP; `reason` is the system's description of the cause.
    public static func transport(_ reason: String) -> Self {
        .init(.transport, "could not complete the request: \(reason) (check the server URL and the network)")
    }

    /// The server's answer cannot be understood; `reason` says how.
    public static func invalidResponse(_ reason: String) -> Self { .init(.invalidResponse, "unexpected answer from the server: \(reason)") }

    /// A call that names the device, by a client made without `registration`.
    public static let noRegistration = Self(.noRegistration, "the client has no registration id: make it with registration: (the registrationId POST /api/register gave) or pass one")

    /// A file operation in the download directory failed.
    public static func fileSystem(_ what: String, path: String, reason: String) -> Self {
        .init(.fileSystem, "cannot \(what) \(path): \(reason) (is the directory there and writable, with space left?)")
    }

    private static func hint(_ status: Int) -> String? {
        switch status {
        case 401: "check the user name and password, or create a new session: this token is revoked or expired"
        case 403: "this account may not do that"
        case 404: "no such notification for this user, or the payload URL was changed"
        case 410: "the payload URL has expired; fetch the payload through the API with credentials"
        case 413: "the server refused the request as too large"
        case 500...599: "a server fault; try again later"
        default: nil
        }
    }

    /// The message, so the error prints as words in logs and test failures.
    public var description: String { message }
}
