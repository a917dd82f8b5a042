import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// `200` of `GET /health`.
struct HealthResponse: Codable, Sendable {
    var status: String
}

/// `GET /ready`: `ready`, or `unready` with what is failing: `database`, `blobs`, and each push
/// provider failing for a cause a person must mend, as `PLATFORM:APP` (`apns:default`).
struct ReadyResponse: Codable, Sendable {
    var status: String
    var failing: [String]?
}
