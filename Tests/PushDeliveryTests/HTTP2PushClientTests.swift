import APNsSandbox
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushTestSupport
import RichPushTestSupport
import Testing
@testable import PushDelivery

/// The push connection against a real TLS + HTTP/2 server (NIO's own) that misbehaves on
/// purpose, one way per path: what the APNs sandbox never does.
@Suite("HTTP/2 push client")
struct HTTP2PushClientTests {
    @Test("answers on many streams of one connection; headers and body reach the server as sent")
    func manyStreams() async throws {
        try await MisbehavingServer.with { server, client async throws in
            try await withThrowingTaskGroup(of: PushHTTPResponse.self) { group in
                for i in 0..<300 {
                    group.addTask {
                        try await client.execute(path: "/echo", headers: [("x-n", "\(i)")], body: ByteBuffer(string: "body \(i)"))
                    }
                }
                var seen = Set<String>()
                for try await response in group {
                    #expect(response.status == 200)
                    let n = try #require(response.headers.first(name: "x-n"))
                    #expect(String(buffer: response.body) == "body \(n)")
                    seen.insert(n)
                }
                #expect(seen.count == 300)
            }
            // The server allows 100 concurrent streams: the rest waited their turn on the same connection.
            #expect(server.connections == 1)
            #expect(server.maxConcurrent <= 100)
        }
    }

    @Test("a stream nobody answers times out and is reset; the connection stays usable")
    func timeout() async throws {
        try await MisbehavingServer.with { server, client async throws in
            do {
                _ = try await client.execute(path: "/silent", headers: [], body: nil, timeout: .milliseconds(300))
                Issue.record("a stream nobody answered was answered")
            } catch let error as PushHTTPError {
                guard case .timeout = error else { Issue.record("\(error)"); return }
            }
            #expect(try await eventually { server.resets == 1 })
            #expect(try await client.execute(path: "/echo", headers: [], body: nil).status == 200)
            #expect(server.connections == 1)
        }
    }

    @Test("an answer over the body limit is refused and its stream reset")
    func bodyTooLarge() async throws {
        try await MisbehavingServer.with { server, client async throws in
            do {
                _ = try await client.execute(path: "/big", headers: [], body: nil)
                Issue.record("a 40 KB answer was accepted")
            } catch let error as PushHTTPError {
                guard case .bodyTooLarge = error else { Issue.record("\(error)"); return }
            }
            #expect(try await eventually { server.resets == 1 })
        }
    }

    @Test("GOAWAY: the unprocessed stream fails (to be retried), and the next request opens a new connection")
    func goAway() async throws {
        try await MisbehavingServer.with { server, client async throws in
            #expect(try await client.execute(path: "/echo", headers: [], body: nil).status == 200)
            do {
                _ = try await client.execute(path: "/goaway", headers: [], body: nil)
                Issue.record("a stream above GOAWAY's last stream was answered")
            } catch let error as PushHTTPError {
                guard case .reset = error else { Issue.record("\(error)"); return }
            }
            #expect(try await client.execute(path: "/echo", headers: [], body: nil).status == 200)
            #expect(server.connections == 2)
        }
    }

    @Test("a connection closed under open streams fails them; the next request reconnects")
    func closed() async throws {
        try await MisbehavingServer.with { server, client async throws in
            let pending = Task { try await client.execute(path: "/silent", headers: [], body: nil) }
            try await Task.sleep(for: .milliseconds(50))
            await #expect(throws: PushHTTPError.self) { try await client.execute(path: "/close", headers: [], body: nil) }
            await #expect(throws: PushHTTPError.self) { try await pending.value }
            #expect(try await client.execute(path: "/echo", headers: [], body: nil).status == 200)
            #expect(server.connections == 2)
        }
    }
}

/// A TLS + HTTP/2 server on a free port: `/echo` answers 200 with the request's `x-n` and body,
/// `/silent` never answers, `/big` answers 40 KB and never ends, `/goaway` sends GOAWAY naming the previous
/// stream as the last processed, `/close` closes the connection.
final class MisbehavingServer: Sendable {
    private struct Counts {
        var connections = 0
        var resets = 0
        var open = 0
        var maxConcurrent = 0
    }
    private let counts = NIOLockedValueBox(Counts())
    var connections: Int { counts.withLockedValue { $0.connections } }
    var resets: Int { counts.withLockedValue { $0.resets } }
    var maxConcurrent: Int { counts.withLockedValue { $0.maxConcurrent } }

    /// The client's per-request timeout is generous by default: the whole suite shares two cores.
    static func with(timeout: TimeAmount = .seconds(60), _ body: (MisbehavingServer, HTTP2PushClient) async throws -> Void) async throws {
        let (certificatePEM, keyPEM) = try APNsSandbox.selfSignedCertificate()
        var serverTLS = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)))
        serverTLS.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: serverTLS)
        let server = MisbehavingServer()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                server.counts.withLockedValue { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: context))
                    try sync.addHandler(NIOHTTP2Handler(mode: .server))
                    try sync.addHandler(FrameResponder(server: server))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        var clientTLS = TLSConfiguration.makeClientConfiguration()
        clientTLS.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)))
        let client = try HTTP2PushClient(host: "127.0.0.1", port: try #require(channel.localAddress?.port), tls: clientTLS,
                                         timeout: timeout)
        do {
            try await body(server, client)
        } catch {
            await client.shutdown()
            try await channel.close()
            throw error
        }
        await client.shutdown()
        try await channel.close()
    }

    private final class FrameResponder: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame
        let server: MisbehavingServer
        var requests: [HTTP2StreamID: (headers: HPACKHeaders, body: ByteBuffer)] = [:]
        var lastAnswered = HTTP2StreamID.rootStream

        init(server: MisbehavingServer) {
            self.server = server
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.payload {
            case .headers(let payload):
                requests[frame.streamID] = (payload.headers, ByteBuffer())
                server.counts.withLockedValue { c in
                    c.open += 1
                    c.maxConcurrent = max(c.maxConcurrent, c.open)
                }
                if payload.endStream { answer(frame.streamID, context: context) }
            case .data(let payload):
                if case .byteBuffer(var bytes) = payload.data { requests[frame.streamID]?.body.writeBuffer(&bytes) }
                if payload.endStream { answer(frame.streamID, context: context) }
            case .rstStream:
                server.counts.withLockedValue { $0.resets += 1; $0.open -= 1 }
                requests[frame.streamID] = nil
            default:
                break
            }
        }

        private func answer(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
            guard let (headers, body) = requests[id] else { return }
            let path = headers.first(name: ":path") ?? ""
            switch path {
            case "/silent":
                return
            case "/close":
                context.close(promise: nil)
                return
            case "/goaway":
                context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: lastAnswered, errorCode: .noError, opaqueData: nil))),
                                      promise: nil)
                return
            default:
                break
            }
            var response: HPACKHeaders = [":status": "200"]
            if let n = headers.first(name: "x-n") { response.add(name: "x-n", value: n) }
            if path == "/big" { // 40 KB and more to come: the stream stays open
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: response)))), promise: nil)
                let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 40 * 1024)
                context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(chunk))))), promise: nil)
                return
            }
            requests[id] = nil
            lastAnswered = id
            server.counts.withLockedValue { $0.open -= 1 }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: response)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
                                  promise: nil)
        }
    }
}
