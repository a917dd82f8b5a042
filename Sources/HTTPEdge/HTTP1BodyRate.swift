import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOSSL
import NIOTLS

/// HTTP/1.1, after NIO's decoder.
enum HTTP1BodyRate: BodyRateParts {
    static func classify(_ part: HTTPServerRequestPart) -> BodyRatePart {
        switch part {
        case .head: return .head
        case .body(let bytes): return .body(bytes.readableBytes)
        case .end: return .end
        }
    }

    static func isFinalHead(_ part: HTTPServerResponsePart) -> Bool {
        guard case .head(let head) = part else { return false }
        return !(100..<200).contains(head.status.code)
    }

    static func requestTimeoutHead() -> HTTPServerResponsePart {
        let headers: HTTPHeaders = ["Connection": "close", "Content-Length": "0", "Date": HTTPDate.value()]
        return .head(HTTPResponseHead(version: .http1_1, status: .requestTimeout, headers: headers))
    }

    static var end: HTTPServerResponsePart { .end(nil) }
}
