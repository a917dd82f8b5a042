import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// Every error's body, `application/problem+json` (RFC 9457).
struct ProblemDetails: Codable, Sendable {
    var type: String
    var title: String
    var status: Int
    /// What was wrong and what to do about it.
    var detail: String
}
