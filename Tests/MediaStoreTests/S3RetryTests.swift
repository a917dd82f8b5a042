import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
@testable import MediaStore

/// An S3 endpoint that answers each request with the next status of its script (then 200), with
/// S3's XML error body, and counts the requests it saw.
private final class ScriptedS3: Sendable {
    let seen = NIOLockedValueBox(0)
    private let script: NIOLockedValueBox<[Int]>
    private let channel: any Channel
    var port: Int { channel.localAddress!.port! }

    init(_ statuses: [Int]) async throws {
        let script = NIOLockedValueBox(statuses)
        self.script = script
        let seen = self.seen
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Answer(script: script, seen: seen))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async throws { try await channel.close() }

    final class Answer: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let script: NIOLockedValueBox<[Int]>
        let seen: NIOLockedValueBox<Int>
        init(script: NIOLockedValueBox<[Int]>, seen: NIOLockedValueBox<Int>) { self.script = script; self.seen = seen }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .end = unwrapInboundIn(data) else { return }
            seen.withLockedValue { $0 += 1 }
            let status = script.withLockedValue { $0.isEmpty ? 200 : $0.removeFirst() }
            let codes = [500: "InternalError", 503: "SlowDown", 403: "AccessDenied"]
            let body = status == 200 ? "" : "<Error><Code>\(codes[status] ?? "Other")</Code><Message>scripted</Message></Error>"
            var headers = HTTPHeaders()
            headers.add(name: "Content-Length", value: String(body.utf8.count))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}

@Suite("S3 client retries what S3 asks to be retried, and nothing else")
struct S3RetryTests {
    func client(port: Int) throws -> S3Client {
        S3Client(location: try S3Location("s3://media?endpoint=http://127.0.0.1:\(port)&timeout=30"),
                 credentials: S3Credentials(accessKey: "AKID", secretKey: "secret"))
    }

    let bytes = ByteBuffer(string: "blob")
    let hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    @Test("a 500 InternalError and a 503 SlowDown are tried again, and the third try stores the blob")
    func transientAnswers() async throws {
        let s3 = try await ScriptedS3([500, 503])
        try await client(port: s3.port).put(key: "k", body: bytes, sha256Hex: hash)
        try await s3.stop()
        #expect(s3.seen.withLockedValue { $0 } == 3)
    }

    @Test("a service that keeps failing is given up after three tries, with its own words")
    func persistentFailure() async throws {
        let s3 = try await ScriptedS3([500, 500, 500, 500])
        await #expect(throws: S3Error.service(status: 500, code: "InternalError", message: "scripted")) {
            try await client(port: s3.port).put(key: "k", body: bytes, sha256Hex: hash)
        }
        try await s3.stop()
        #expect(s3.seen.withLockedValue { $0 } == S3Client.attempts)
    }

    @Test("a 403 is the request's fault: answered at once, never tried again")
    func clientErrors() async throws {
        let s3 = try await ScriptedS3([403])
        await #expect(throws: S3Error.service(status: 403, code: "AccessDenied", message: "scripted")) {
            try await client(port: s3.port).put(key: "k", body: bytes, sha256Hex: hash)
        }
        try await s3.stop()
        #expect(s3.seen.withLockedValue { $0 } == 1)
    }
}
