import Logging
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing
@testable import HTTPEdge

/// `H2FrameFastPath` between NIOHTTP2's connection handler and its multiplexer, on an embedded
/// channel: what it answers itself, frame by frame, and what it passes on untouched.
@Suite("HTTP/2 hot GETs answered at the connection's frame level")
struct H2FrameFastPathTests {
    /// An embedded channel with the handler, frames arriving as the HTTP/2 handler reads them;
    /// what passes it inbound is read with `readInbound`, what it writes with `readOutbound`.
    private func channel() throws -> EmbeddedChannel {
        let hotPath = HotPath(routes: TableRoutes(["a": "alpha"]), accessLog: AccessLog(fraction: 0, logger: Logger(label: "test")))
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(H2FrameFastPath(fastPath: hotPath, patience: .seconds(30)))
        return channel
    }

    private func get(_ path: String, stream: Int, endStream: Bool = true, extra: [(String, String)] = []) -> HTTP2Frame {
        var headers = HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":authority", "x"), (":path", path)])
        for (name, value) in extra { headers.add(name: name, value: value) }
        return HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: headers, endStream: endStream)))
    }

    @Test("a hot GET in one HEADERS frame is answered with HEADERS (200, the route's fields, Date, Server) and a DATA frame ending the stream, flushed at the read's end; the frame goes no further, nor do the stream's later frames and events until NIOHTTP2 closes it")
    func answersHot() throws {
        let channel = try channel()
        try channel.writeInbound(get("/hot/a", stream: 1))
        #expect(try channel.readInbound(as: HTTP2Frame.self) == nil)
        channel.pipeline.fireChannelReadComplete()
        let head = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .headers(let headers) = head.payload else { Issue.record("not HEADERS: \(head)"); return }
        #expect(head.streamID == 1 && !headers.endStream)
        #expect(headers.headers[":status"] == ["200"] && headers.headers["content-type"] == ["text/plain"])
        #expect(headers.headers["content-length"] == ["5"] && headers.headers["server"] == ["RichPush"])
        #expect(headers.headers["date"].first?.hasSuffix(" GMT") == true)
        let data = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .data(let body) = data.payload, case .byteBuffer(let bytes) = body.data else { Issue.record("not DATA: \(data)"); return }
        #expect(data.streamID == 1 && body.endStream && String(buffer: bytes) == "alpha")
        // The client's later frames for it and NIOHTTP2's events are not the multiplexer's.
        try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .windowUpdate(windowSizeIncrement: 100)))
        try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .rstStream(.cancel)))
        channel.pipeline.fireUserInboundEventTriggered(NIOHTTP2StreamCreatedEvent(streamID: 1, localInitialWindowSize: 65535, remoteInitialWindowSize: 65535))
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 1, reason: .cancel))
        #expect(try channel.readInbound(as: HTTP2Frame.self) == nil)
        // Once closed, a frame on that stream is the multiplexer's to judge again.
        try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .windowUpdate(windowSizeIncrement: 1)))
        #expect(try channel.readInbound(as: HTTP2Frame.self)?.streamID == 1)
        _ = try channel.finish()
    }

    @Test("passed on untouched: a GET not ended on its HEADERS, a cold path, a ranged or conditional GET, two Authorization fields, a HEAD, an unknown pseudo-field, stream 0's frames", arguments: 0..<7)
    func passesOn(_ which: Int) throws {
        let channel = try channel()
        let frame: HTTP2Frame = switch which {
        case 0: get("/hot/a", stream: 3, endStream: false)
        case 1: get("/cold", stream: 3)
        case 2: get("/hot/a", stream: 3, extra: [("range", "bytes=0-1")])
        case 3: get("/hot/a", stream: 3, extra: [("if-none-match", "\"x\"")])
        case 4: get("/hot/a", stream: 3, extra: [("authorization", "Basic a"), ("authorization", "Basic b")])
        case 5: HTTP2Frame(streamID: 3, payload: .headers(.init(headers: HPACKHeaders([(":method", "HEAD"), (":scheme", "https"), (":path", "/hot/a")]), endStream: true)))
        default: HTTP2Frame(streamID: 3, payload: .headers(.init(headers: HPACKHeaders([(":method", "GET"), (":scheme", "https"), (":path", "/hot/a"), (":protocol", "x")]), endStream: true)))
        }
        try channel.writeInbound(frame)
        #expect(try channel.readInbound(as: HTTP2Frame.self)?.streamID == 3)
        try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false)))
        #expect(try channel.readInbound(as: HTTP2Frame.self)?.streamID == .rootStream)
        channel.pipeline.fireChannelReadComplete()
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        _ = try channel.finish()
    }

    @Test("an answer still open (its window never opened) is reset with CANCEL once the patience has passed, and only then; an answer NIOHTTP2 refuses to write resets its stream with INTERNAL_ERROR instead of leaving it open")
    func deadlines() throws {
        let hotPath = HotPath(routes: TableRoutes(["a": "alpha"]), accessLog: AccessLog(fraction: 0, logger: Logger(label: "test")))
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(H2FrameFastPath(fastPath: hotPath, patience: .seconds(30)))
        try channel.writeInbound(get("/hot/a", stream: 1))
        channel.pipeline.fireChannelReadComplete()
        #expect(try channel.readOutbound(as: HTTP2Frame.self) != nil && channel.readOutbound(as: HTTP2Frame.self) != nil)
        loop.advanceTime(by: .seconds(29))
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        loop.advanceTime(by: .seconds(2))
        let reset = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .rstStream(let code) = reset.payload else { Issue.record("not RST_STREAM: \(reset)"); return }
        #expect(reset.streamID == 1 && code == .cancel)
        // A stream closed in time is not reset.
        try channel.writeInbound(get("/hot/a", stream: 3))
        channel.pipeline.fireChannelReadComplete()
        _ = try channel.readOutbound(as: HTTP2Frame.self)
        _ = try channel.readOutbound(as: HTTP2Frame.self)
        channel.pipeline.fireUserInboundEventTriggered(StreamClosedEvent(streamID: 3, reason: nil))
        loop.advanceTime(by: .seconds(61))
        #expect(try channel.readOutbound(as: HTTP2Frame.self) == nil)
        // NIOHTTP2 refusing the answer's frames.
        try channel.writeInbound(get("/hot/a", stream: 5))
        channel.pipeline.fireChannelReadComplete()
        _ = try channel.readOutbound(as: HTTP2Frame.self)
        _ = try channel.readOutbound(as: HTTP2Frame.self)
        channel.pipeline.fireErrorCaught(NIOHTTP2Errors.streamError(streamID: 5, baseError: NIOHTTP2Errors.noSuchStream(streamID: 5)))
        let refused = try #require(try channel.readOutbound(as: HTTP2Frame.self))
        guard case .rstStream(let refusedCode) = refused.payload else { Issue.record("not RST_STREAM: \(refused)"); return }
        #expect(refused.streamID == 5 && refusedCode == .internalError)
        _ = try channel.finish()
    }
}
