import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// A request part as `BodyRateHandler` counts it.
enum BodyRatePart {
    case head
    case body(Int)
    case end
}
