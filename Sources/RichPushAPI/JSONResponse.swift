import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The JSON answers of the routes: sorted keys, slashes as they are.
enum JSONResponse {
    static func encode(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(status: status, headers: [.contentType: "application/json", .contentLength: String(data.count)],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
