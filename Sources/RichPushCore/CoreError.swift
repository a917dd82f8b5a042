/// A refusal by the core services, with the HTTP-ish class it maps to and words a person can act on.
public struct CoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of refusal this is.
    public enum Kind: Sendable, Equatable {
        /// The input is malformed (400).
        case invalid
        /// The input is well-formed but cannot be processed (422).
        case unprocessable
        /// The thing does not exist, or not for this caller (404).
        case notFound
        /// The caller may not do this (403).
        case forbidden
        /// It existed once and is gone (410).
        case gone
        /// It already exists (409).
        case conflict
        /// It is larger than allowed (413).
        case tooLarge
    }

    /// The class of the refusal.
    public let kind: Kind
    /// What was wrong, for a person.
    public let message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
