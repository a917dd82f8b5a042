import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// An HTTP/2 stream, after the conversion to HTTP types.
enum HTTP2BodyRate: BodyRateParts {
    static func classify(_ part: HTTPRequestPart) -> BodyRatePart {
        switch part {
        case .head: return .head
        case .body(let bytes): return .body(bytes.readableBytes)
        case .end: return .end
        }
    }

    static func isFinalHead(_ part: HTTPResponsePart) -> Bool {
        guard case .head(let head) = part else { return false }
        return head.status.kind != .informational
    }

    static func requestTimeoutHead() -> HTTPResponsePart {
        .head(HTTPResponse(status: .requestTimeout))
    }

    static var end: HTTPResponsePart { .end(nil) }
}
