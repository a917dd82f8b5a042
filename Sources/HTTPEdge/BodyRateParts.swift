import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// The request and response parts of one HTTP version, as `BodyRateHandler` reads and writes them.
protocol BodyRateParts: SendableMetatype {
    associatedtype RequestPart
    associatedtype ResponsePart
    static func classify(_ part: RequestPart) -> BodyRatePart
    /// Whether `part` begins a final answer (a head other than 1xx).
    static func isFinalHead(_ part: ResponsePart) -> Bool
    /// The head of a `408 Request Timeout` with no body.
    static func requestTimeoutHead() -> ResponsePart
    /// The end of a response.
    static var end: ResponsePart { get }
}
