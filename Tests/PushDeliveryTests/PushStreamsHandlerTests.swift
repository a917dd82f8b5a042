import HTTP2Client
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHPACK
import Testing
@testable import PushDelivery

/// The push connection's handler on an embedded channel, byte for byte: what it writes before
/// and after the server's SETTINGS, as APNs starts a connection (one stream at a time until a
/// token is good) and as a server that counts streams beyond its limit as an error would.
@Suite("The push connection's HTTP/2 handler, on an embedded channel")
struct PushStreamsHandlerTests {
    /// Frames written by the handler: (type, flags, stream), the preface skipped.
    private static func written(_ channel: EmbeddedChannel) throws -> [(type: UInt8, flags: UInt8, stream: UInt32)] {
        var bytes: [UInt8] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readBytes(length: buffer.readableBytes) ?? [] }
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        if bytes.starts(with: preface) { bytes.removeFirst(preface.count) }
        return frames(bytes)
    }

    /// The frames in `bytes`: (type, flags, stream).
    private static func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: UInt32)] {
        var frames: [(UInt8, UInt8, UInt32)] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let stream = UInt32(bytes[index + 5] & 0x7F) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8])
            frames.append((bytes[index + 3], bytes[index + 4], stream))
            index += 9 + length
        }
        #expect(index == bytes.count, "a partial frame was written")
        return frames
    }

    private static func frame(type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> ByteBuffer {
        let header: [UInt8] = [UInt8(truncatingIfNeeded: payload.count >> 16), UInt8(truncatingIfNeeded: payload.count >> 8), UInt8(truncatingIfNeeded: payload.count),
                               type, flags, UInt8(truncatingIfNeeded: stream >> 24), UInt8(truncatingIfNeeded: stream >> 16), UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream)]
        return ByteBuffer(bytes: header + payload)
    }

    /// A SETTINGS frame with MAX_CONCURRENT_STREAMS `limit`.
    private static func settings(maxConcurrentStreams limit: UInt32) -> ByteBuffer {
        frame(type: 0x4, [0x00, 0x03, UInt8(limit >> 24), UInt8(truncatingIfNeeded: limit >> 16), UInt8(truncatingIfNeeded: limit >> 8), UInt8(truncatingIfNeeded: limit)])
    }

    @Test("no stream opens before the server's SETTINGS; then no more than its MAX_CONCURRENT_STREAMS (1), the next after each answer, and more once it is raised")
    func waitsForSettings() throws {
        let (channel, handler) = try Self.connected { #expect($0.map(\.type) == [0x4, 0x8], "the preface, SETTINGS and the connection's WINDOW_UPDATE") }
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(4, into: results))
        #expect(try Self.written(channel).isEmpty, "a stream opened before the server's SETTINGS")

        try channel.writeInbound(Self.settings(maxConcurrentStreams: 1))
        let first = try Self.written(channel)
        #expect(first.filter { $0.type == 0x1 }.map(\.stream) == [1], "\(first)")
        #expect(first.contains { $0.type == 0x4 && $0.flags == 0x1 }, "the SETTINGS acknowledged")

        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        try channel.writeInbound(Self.answer(1, &encoder))
        #expect(try Self.written(channel).filter { $0.type == 0x1 }.map(\.stream) == [3])
        #expect(results.withLockedValue { $0 } == [0: "200"])

        // Raised to 10: the two still waiting go at once.
        try channel.writeInbound(Self.settings(maxConcurrentStreams: 10))
        #expect(try Self.written(channel).filter { $0.type == 0x1 }.map(\.stream) == [5, 7])
        for stream: UInt32 in [3, 5, 7] { try channel.writeInbound(Self.answer(stream, &encoder)) }
        #expect(results.withLockedValue { $0 } == [0: "200", 1: "200", 2: "200", 3: "200"])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("while more wait than the server has room for, streams open in runs of an eighth of its MAX_CONCURRENT_STREAMS (12 of 100), not one write per answer")
    func opensInRuns() throws {
        let (channel, handler) = try Self.connected()
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(120, into: results))
        try channel.writeInbound(Self.settings(maxConcurrentStreams: 100))
        let opened = try Self.written(channel).filter { $0.type == 0x1 }.map(\.stream)
        let first: [UInt32] = (0..<100).map { UInt32(2 * $0 + 1) }
        #expect(opened == first)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        // Eleven answers, each in a read of its own: twenty wait, eleven slots are free, nothing is written.
        for stream in opened.prefix(11) {
            try channel.writeInbound(Self.answer(stream, &encoder))
            let early = try Self.written(channel)
            #expect(early.isEmpty, "\(early)")
        }
        // The twelfth: twelve open, in one write.
        try channel.writeInbound(Self.answer(opened[11], &encoder))
        var writes: [[UInt32]] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) {
            writes.append(Self.frames(buffer.readBytes(length: buffer.readableBytes) ?? []).filter { $0.type == 0x1 }.map(\.stream))
        }
        let run: [UInt32] = (100..<112).map { UInt32(2 * $0 + 1) }
        #expect(writes == [run], "\(writes)")
        #expect(results.withLockedValue { $0.count } == 12)
        // Eight answers more: the eight left fit, and open at once.
        for stream in opened[12..<20] { try channel.writeInbound(Self.answer(stream, &encoder)) }
        let last: [UInt32] = (112..<120).map { UInt32(2 * $0 + 1) }
        #expect(try Self.written(channel).filter { $0.type == 0x1 }.map(\.stream) == last)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    /// A handler on an embedded channel, connected, its preface read; and `count` requests whose
    /// results (status, or -1 and the error) land in `results`.
    private static func connected(timeout: TimeAmount = .seconds(30),
                                  preface: ([(type: UInt8, flags: UInt8, stream: UInt32)]) -> Void = { _ in }) throws -> (EmbeddedChannel, PushStreamsHandler) {
        let channel = EmbeddedChannel()
        let handler = PushStreamsHandler(timeout: timeout, retired: NIOLockedValueBox(false), endpoint: "test:443", authority: "test")
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        preface(try written(channel))
        return (channel, handler)
    }

    /// A HEADERS frame ending `stream` with 200 (and an `apns-id`), encoded by `encoder`.
    private static func answer(_ stream: UInt32, _ encoder: inout HPACKEncoder) throws -> ByteBuffer {
        var block = ByteBuffer()
        try encoder.encode(headers: [":status": "200", "apns-id": "id-\(stream)"], to: &block)
        return frame(type: 0x1, flags: 0x5, stream: stream, Array(block.readableBytesView))
    }

    private static func requests(_ count: Int, into results: NIOLockedValueBox<[Int: String]>) -> [PushConnection.Request] {
        (0..<count).map { n in
            PushConnection.Request(method: "POST", path: "/3/device/\(n)", fields: [], body: nil, timeout: nil) { result in
                results.withLockedValue { $0[n] = (try? result.get()).map { String($0.status) } ?? "\(result)" }
            }
        }
    }

    @Test("SETTINGS split across two reads: no stream opens on its header alone, only once it is applied (MAX_CONCURRENT_STREAMS 1)")
    func splitSettings() throws {
        let (channel, handler) = try Self.connected()
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(3, into: results))
        var settings = Self.settings(maxConcurrentStreams: 1)
        try channel.writeInbound(settings.readSlice(length: 11)!)
        #expect(try Self.written(channel).isEmpty, "streams opened on half a SETTINGS frame")
        try channel.writeInbound(settings)
        #expect(try Self.written(channel).filter { $0.type == 0x1 }.map(\.stream) == [1])
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("an answer and a broken frame in one read: the answer is handed on, the other stream fails, GOAWAY is sent and the connection closed")
    func answerThenProtocolError() throws {
        let (channel, handler) = try Self.connected()
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(2, into: results))
        try channel.writeInbound(Self.settings(maxConcurrentStreams: 10))
        _ = try Self.written(channel)
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var read = try Self.answer(1, &encoder)
        var pushPromise = Self.frame(type: 0x5, flags: 0x4, stream: 3, [0, 0, 0, 2])
        read.writeBuffer(&pushPromise)
        try channel.writeInbound(read)
        #expect(results.withLockedValue { $0[0] } == "200")
        #expect(results.withLockedValue { $0[1] }?.contains("PUSH_PROMISE") == true, "\(results.withLockedValue { $0 })")
        #expect(try Self.written(channel).contains { $0.type == 0x7 }, "no GOAWAY")
        #expect(!channel.isActive)
    }

    @Test("a server that never sends SETTINGS: the request waits its timeout, fails, and the connection is dropped to be replaced")
    func noSettings() async throws {
        let (channel, handler) = try Self.connected(timeout: .milliseconds(60))
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(1, into: results))
        try await Task.sleep(for: .milliseconds(120))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(results.withLockedValue { $0[0] }?.contains("no answer in time") == true, "\(results.withLockedValue { $0 })")
        #expect(!channel.isActive)
    }

    @Test("a server that floods PINGs while the connection cannot write: past 1 MiB of replies held, GOAWAY ENHANCE_YOUR_CALM and the connection closed; the open stream fails")
    func pingFlood() throws {
        let (channel, handler) = try Self.connected()
        let results = NIOLockedValueBox<[Int: String]>([:])
        handler.start(Self.requests(1, into: results))
        try channel.writeInbound(Self.settings(maxConcurrentStreams: 10))
        _ = try Self.written(channel)
        channel.isWritable = false
        var pings = ByteBuffer()
        for n in 0..<1_000 {
            var ping = Self.frame(type: 0x6, [0, 0, 0, 0, 0, 0, UInt8(n >> 8), UInt8(n & 0xFF)])
            pings.writeBuffer(&ping)
        }
        // 17 bytes of reply for each PING: 1,000 a read, 62 reads pass 1 MiB.
        var reads = 0
        while channel.isActive, reads < 100 {
            try channel.writeInbound(pings)
            reads += 1
        }
        #expect(!channel.isActive)
        #expect((60...70).contains(reads), "closed after \(reads) reads")
        var bytes: [UInt8] = []
        while var buffer = try channel.readOutbound(as: ByteBuffer.self) { bytes += buffer.readBytes(length: buffer.readableBytes) ?? [] }
        let goAway: [UInt8] = [0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xB]
        #expect(bytes.suffix(goAway.count) == goAway[...], "the last frame is GOAWAY ENHANCE_YOUR_CALM")
        #expect(results.withLockedValue { $0[0] }?.contains("ENHANCE_YOUR_CALM") == true, "\(results.withLockedValue { $0 })")
    }
}
