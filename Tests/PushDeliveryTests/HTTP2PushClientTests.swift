import APNsSandbox
import Crypto
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushTestSupport
import RichPushCore
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
            // The connection first, with the server's SETTINGS: on a machine loaded enough that
            // they take longer than the 300 ms, the request would time out while still waiting
            // for a stream, and the client rightly replaces a connection that opened none (CI).
            #expect(try await client.execute(path: "/echo", headers: [], body: nil).status == 200)
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

    @Test("an APNs client's pushes: what a campaign's pushes share (the provider token, the topic) enters HPACK's table; what each has of its own (:path, apns-id, apns-collapse-id) never does")
    func apnsIndexing() async throws {
        try await MisbehavingServer.with { server, _ async throws in
            let dir = try Fixtures.tempDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let roots = dir.appendingPathComponent("server.pem")
            try Data(server.certificatePEM.utf8).write(to: roots)
            let apns = try APNsClient(credentials: APNsCredentials(key: P256.Signing.PrivateKey(), keyID: "KEY1234567", teamID: "TEAM123456"),
                                      topic: "com.example.app", environment: .custom("https://127.0.0.1:\(server.port)"), extraRoots: [roots.path])
            for n in 0..<3 {
                _ = await apns.send(token: String(format: "%064x", n + 1), payload: Data(#"{"aps":{"alert":"hi"}}"#.utf8), mode: .alert,
                                    pushID: UUID().uuidString.lowercased(), expiration: Date(timeIntervalSince1970: 1_900_000_000), collapseID: "rp-\(n + 1)")
            }
            try await apns.shutdown()
            let requests = server.received
            try #require(requests.count == 3)
            for headers in requests {
                let indexing = Dictionary(headers.map { ($0.name, $0.indexable) }, uniquingKeysWith: { first, _ in first })
                for name in [":path", "apns-id", "apns-collapse-id"] { #expect(indexing[name] == .neverIndexed, "\(name)") }
                for name in ["authorization", "apns-topic", "apns-push-type", "apns-priority", "apns-expiration"] {
                    #expect(indexing[name] == .indexable, "\(name)")
                }
            }
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
/// stream as the last processed, `/close` closes the connection. Every request's header block is
/// kept (`received`), with how each field was sent.
final class MisbehavingServer: Sendable {
    private struct Counts {
        var connections = 0
        var resets = 0
        var open = 0
        var maxConcurrent = 0
    }
    private let counts = NIOLockedValueBox(Counts())
    private let requests = NIOLockedValueBox<[HPACKHeaders]>([])
    private let endpoint = NIOLockedValueBox((port: 0, certificatePEM: ""))
    /// The server's port, for clients made in a test.
    var port: Int { endpoint.withLockedValue { $0.port } }
    /// The server's certificate (PEM), for clients made in a test to trust.
    var certificatePEM: String { endpoint.withLockedValue { $0.certificatePEM } }
    var connections: Int { counts.withLockedValue { $0.connections } }
    /// Every request's header block as decoded, with how each field was sent (indexed or not).
    var received: [HPACKHeaders] { requests.withLockedValue { $0 } }
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
        let port = try #require(channel.localAddress?.port)
        server.endpoint.withLockedValue { $0 = (port, certificatePEM) }
        var clientTLS = TLSConfiguration.makeClientConfiguration()
        clientTLS.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)))
        let client = try HTTP2PushClient(host: "127.0.0.1", port: port, tls: clientTLS,
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
                server.requests.withLockedValue { $0.append(payload.headers) }
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
