/// A delivery-side error with words a person can act on.
public struct PushError: Error, Sendable, CustomStringConvertible {
    private enum Code: Sendable { case configuration, transport }
    private let code: Code
    /// What is wrong.
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A flag or file is wrong.
    public static func configuration(_ message: String) -> PushError { .init(.configuration, message) }
    /// The push service could not be reached or answered nonsense.
    public static func transport(_ message: String) -> PushError { .init(.transport, message) }

    /// Whether a flag or file is wrong (rather than the service out of reach).
    public var isConfiguration: Bool { code == .configuration }

    public var description: String { message }
}

/// What one send attempt came to.
public enum DeliveryOutcome: Sendable, Equatable {
    /// Accepted by the push service.
    case sent(id: String?)
    /// Refused for good; `prune` means the device registration is dead and must go.
    case failed(reason: String, prune: Bool)
    /// Worth trying again later (`after`, when the service said how long to wait).
    case retry(reason: String, after: Double?)
}
