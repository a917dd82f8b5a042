import Foundation
import MediaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
@testable import RichPushAPI
import RichPushServer
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Clients that hold a connection without finishing what they began: a body trickled below the
/// minimum rate, a TLS connection with no handshake, an HTTP/2 connection gone silent. Each is
/// closed within a generous bound of its (shrunk) limit; without the limit each stays open.
@Suite("Slow bodies and bare TLS connects")
struct SlowClientTests {
    /// The head of alice's `POST /api/media` of `length` bytes.
    static func uploadHead(_ length: Int) -> String {
        let basic = Data("alice:wonderland".utf8).base64EncodedString()
        return "POST /api/media HTTP/1.1\r\nHost: x\r\nAuthorization: Basic \(basic)\r\nContent-Length: \(length)\r\n\r\n"
    }

    @Test("a body trickled below the minimum rate is answered 408 and closed; the same body at full speed, or slowly above the rate, is stored")
    func slowBody() async throws {
        try await TestServer.run(engine: .embedded, { $0.bodyRateWindow = 1; $0.bodyRateMinimum = 1024 }) { s in
            let port = try #require(s.client.port)
            let png = PNGBuilder.rgb(width: 200, height: 200, seed: 41)
            let head = Self.uploadHead(png.count)
            // 5 bytes a second against 1 KiB a second: cut off after a window or two. Without the
            // limit the connection stays open as long as bytes keep coming (here, 25 s).
            let slow = try await onOwnThread { () throws -> (sent: Int, seconds: Double, answer: String) in
                let fd = try connectTo(port: port, timeout: 10)
                defer { close(fd) }
                sendAll(fd, Array(head.utf8))
                let start = Date()
                var sent = 0
                while sent < png.count, Date().timeIntervalSince(start) < 25 {
                    if send(fd, [png[sent]], 1, Int32(MSG_NOSIGNAL)) <= 0 { break }
                    sent += 1
                    usleep(200_000)
                    var probe = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    if poll(&probe, 1, 0) > 0 { break } // the answer, or the close
                }
                let seconds = Date().timeIntervalSince(start)
                return (sent, seconds, receiveAll(fd))
            }
            #expect(slow.seconds < 20, "still open after \(slow.seconds) s and \(slow.sent) bytes")
            #expect(slow.sent < png.count)
            // The 408, unless the close overtook it.
            #expect(slow.answer.isEmpty || slow.answer.hasPrefix("HTTP/1.1 408"), "\(slow.answer.prefix(120))")

            let fast = try await onOwnThread { () throws -> String in
                let fd = try connectTo(port: port, timeout: 30)
                defer { close(fd) }
                sendAll(fd, Array(head.utf8) + png)
                return exchange(fd, "").head
            }
            #expect(fast.hasPrefix("HTTP/1.1 201"), "\(fast)")

            // 16 KiB every 250 ms: slower than the network allows, well above the minimum, over several windows.
            let other = PNGBuilder.rgb(width: 200, height: 200, seed: 42)
            let otherHead = Self.uploadHead(other.count)
            let steady = try await onOwnThread { () throws -> String in
                let fd = try connectTo(port: port, timeout: 30)
                defer { close(fd) }
                sendAll(fd, Array(otherHead.utf8))
                var offset = 0
                while offset < other.count {
                    usleep(250_000)
                    let end = min(offset + (16 << 10), other.count)
                    sendAll(fd, Array(other[offset..<end]))
                    offset = end
                }
                return exchange(fd, "").head
            }
            #expect(steady.hasPrefix("HTTP/1.1 201"), "\(steady)")
        }
    }

    @Test("under --tls-cert a connection that never finishes its handshake is closed at the handshake deadline, a silent HTTP/2 connection at the idle timeout, and a slow body over HTTP/2 or HTTPS/1.1 as over HTTP")
    func tlsDeadlines() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (certificatePath, keyPath) = try TLSFixtures.certificateFiles(in: dir)
        let bodyFile = dir.appendingPathComponent("body.bin")
        try Data(count: 1 << 20).write(to: bodyFile)
        try await TestServer.run(engine: .embedded, {
            $0.tlsCertificatePath = certificatePath
            $0.tlsKeyPath = keyPath
            $0.tlsHandshakeTimeout = 2
            $0.idleTimeout = 10 // the 3 s wait below stays well inside it on a loaded machine
            $0.bodyRateWindow = 1
            $0.bodyRateMinimum = 1024
        }) { s in
            let port = try #require(s.client.port)

            // A bare TCP connect, and one that stops inside its ClientHello. Without the deadline
            // both wait out the 30 s receive timeout.
            for hello in [[UInt8](), [0x16, 0x03, 0x01]] {
                let seconds = try await onOwnThread { () throws -> Double in
                    let fd = try connectTo(port: port, timeout: 30)
                    defer { close(fd) }
                    sendAll(fd, hello)
                    let start = Date()
                    var byte: UInt8 = 0
                    _ = recv(fd, &byte, 1, 0) // 0 once the server closes; -1 at the receive timeout
                    return Date().timeIntervalSince(start)
                }
                #expect(seconds < 20, "a connection that sent \(hello.count) bytes of a handshake was open for \(seconds) s")
            }

            // curl (a client nobody here wrote) over both protocols: served as ever; an upload at
            // 200 bytes a second is cut off (408, or the reset that ends the stream or connection).
            func curl(_ arguments: [String]) async throws -> String {
                try await onOwnThread {
                    try runCapturing("/usr/bin/env", ["curl", "-s", "--max-time", "60", "--cacert", certificatePath] + arguments).output
                }
            }
            for version in ["--http2", "--http1.1"] {
                let health = try await curl([version, "-w", " %{http_version} %{http_code}", "https://127.0.0.1:\(port)/health"])
                #expect(health.hasSuffix(version == "--http2" ? " 2 200" : " 1.1 200"), "\(health)")
                let start = Date()
                let upload = try await curl([version, "--limit-rate", "200", "-u", "alice:wonderland", "-o", "/dev/null", "-w", "%{http_code}",
                                             "--data-binary", "@\(bodyFile.path)", "https://127.0.0.1:\(port)/api/media"])
                let seconds = Date().timeIntervalSince(start)
                #expect(seconds < 20, "a \(version) upload at 200 bytes a second went on for \(seconds) s")
                #expect(upload == "408" || upload == "000", "\(version): \(upload)")
            }

            // A client that finishes its handshake (choosing HTTP/2) is not cut at the handshake
            // deadline; silent after it, it is closed at the idle timeout, PING unanswered or not.
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            let firstRead = loop.makePromise(of: Void.self)
            let context = try TLSFixtures.trustingClient(protocols: ["h2"])
            let silent = try await ClientBootstrap(group: loop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                        try channel.pipeline.syncOperations.addHandler(FirstRead(firstRead))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            defer { silent.close(promise: nil) }
            try await firstRead.futureResult.get() // the server's HTTP/2 SETTINGS: the handshake is done
            try await Task.sleep(for: .seconds(3))
            #expect(silent.isActive, "a connection whose handshake had completed was closed at the handshake deadline")
            #expect(try await eventually(within: 30) { !silent.isActive }, "a silent HTTP/2 connection stayed open")
        }
    }

    @Test("under --tls-cert a connection the server closes whole (here at its idle timeout) while the client neither answers nor closes gets a close_notify, and is gone at once after it")
    func closeNotifyUnanswered() async throws {
        try await TLSFixtures.runServer({ $0.idleTimeout = 1 }) { s in
            let port = try #require(s.client.port)
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            for attempt in 1...2 {
                let mute = MuteAfterHandshake()
                let closed = CloseNotifyThenClose(loop.makePromise(of: (Bool, NIODeadline).self), mute: mute)
                _ = try await TLSFixtures.connect(port: port, protocols: ["http/1.1"], below: mute, above: closed)
                // The fast path's front closes the silent connection at the idle timeout (close,
                // not a half close): the server waits a moment for the client to close its side
                // (tlsCloseWait), then sends its close_notify and closes the socket.
                let (sawCloseNotify, at) = try await closed.closed.futureResult.get()
                let seconds = Double((NIODeadline.now() - at).nanoseconds) / 1e9
                #expect(sawCloseNotify, "attempt \(attempt): the server closed without a close_notify")
                #expect(seconds < 2.5, "attempt \(attempt): the server closed the socket \(seconds) s after its close_notify")
            }
        }
    }

    @Test("under --tls-cert a client that closes its side right after asking for a cached image and to close after (a FIN, no close_notify, as most clients do) gets the whole image, and the connection is closed at once after it, not after the server's wait for its close_notify")
    func clientClosesFirst() async throws {
        // tlsCloseWait long, so that a wait for the client's close_notify cannot pass for none.
        // NIOSSL's own wait went on after the client had closed: every closed connection, and its
        // TLS state, was kept for the whole of it.
        try await TLSFixtures.runServer({ $0.publicMedia = true; $0.tlsCloseWait = 30 }) { s in
            let port = try #require(s.client.port)
            let logo = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
            let get = "GET /media/\(MediaID(hashing: logo).hex) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            /// A TLS connection whose client can be muted below its TLS; the answer it reads.
            func connect() async throws -> (any Channel, MuteAfterHandshake, Answer) {
                let answer = Answer(), mute = MuteAfterHandshake()
                return (try await TLSFixtures.connect(port: port, protocols: ["http/1.1"], below: mute, above: answer), mute, answer)
            }
            // The first fetch is the router's, and caches the image.
            let (first, _, firstAnswer) = try await connect()
            try await first.writeAndFlush(ByteBuffer(string: get))
            #expect(try await eventually(within: 10) { firstAnswer.count > logo.count })
            first.close(promise: nil)
            // The second is the fast path's: it answers and closes the connection whole.
            let (channel, mute, answer) = try await connect()
            try await channel.writeAndFlush(ByteBuffer(string: get))
            // At once, before the answer: from now on the client's TLS says nothing (no close_notify)
            // and closes nothing, and below it the FIN alone. The whole answer must still come,
            // then the server closes the socket.
            try await channel.eventLoop.submit {
                mute.muted = true
                try channel.pipeline.syncOperations.context(handler: mute).close(mode: .output, promise: nil)
            }.get()
            #expect(try await eventually(within: 10) { answer.count > logo.count }, "the answer was cut: \(answer.count) bytes")
            #expect(try await eventually(within: 10) { !channel.isActive }, "the connection was still open 10 s after the client closed its side")
        }
    }
}

/// Sits between the socket and the client's TLS handler: once the handshake is done, drops
/// everything the client would send (its close_notify) and its close, so only the server can
/// end the connection.
private final class MuteAfterHandshake: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = ByteBuffer
    /// Set on the channel's event loop.
    var muted = false

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if muted { promise?.succeed() } else { context.write(data, promise: promise) }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if muted { promise?.succeed() } else { context.close(mode: mode, promise: promise) }
    }
}

/// Mutes the client once its handshake is done; when the server closes the TCP connection,
/// succeeds `closed` with whether a close_notify came first, and when it came.
private final class CloseNotifyThenClose: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let closed: EventLoopPromise<(Bool, NIODeadline)>
    private let mute: MuteAfterHandshake
    private var closeNotifyAt: NIODeadline?

    init(_ closed: EventLoopPromise<(Bool, NIODeadline)>, mute: MuteAfterHandshake) {
        self.closed = closed
        self.mute = mute
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case TLSUserEvent.handshakeCompleted: mute.muted = true // its Finished is written by now
        case TLSUserEvent.shutdownCompleted: closeNotifyAt = .now()
        default: break
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {} // the unclean end is the point

    func channelInactive(context: ChannelHandlerContext) {
        closed.succeed((closeNotifyAt != nil, closeNotifyAt ?? .now()))
    }
}

/// Succeeds `promise` at the first bytes the server sends after the handshake; fails it if the
/// connection closes first.
private final class FirstRead: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let promise: EventLoopPromise<Void>

    init(_ promise: EventLoopPromise<Void>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        promise.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        promise.fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }
}

/// What a client connection has read, as text.
private final class Answer: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    private let lock = NIOLock()
    private var bytes: [UInt8] = []
    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }
    var count: Int { lock.withLock { bytes.count } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        lock.withLock { bytes += buffer.readableBytesView }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {} // an unclean end is expected
}
