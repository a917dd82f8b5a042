@testable import HTTP2Client
import NIOCore
import NIOHPACK
import Testing

// The server's side of the conversation: frames built and read here by their RFC 9113 numbers
// (not BenchKit's), header blocks encoded and decoded by NIOHPACK.

/// Frame types by their RFC 9113 numbers.
enum FrameType: UInt8 {
    case data = 0, headers, priority, rstStream, settings, pushPromise, ping, goAway, windowUpdate, continuation
}

/// A frame, as the session writes it or as the test's server sends it.
struct Frame: Equatable, CustomStringConvertible {
    var type: FrameType
    var flags: UInt8
    var stream: UInt32
    var payload: [UInt8]

    init(_ type: FrameType, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) {
        self.type = type
        self.flags = flags
        self.stream = stream
        self.payload = payload
    }

    /// The frame on the wire: length (24 bits), type, flags, stream id, then the payload.
    var bytes: [UInt8] {
        var bytes = frameHeader(length: payload.count, type: type.rawValue, flags: flags, stream: stream)
        bytes += payload
        return bytes
    }

    var description: String { "\(type) flags 0x\(String(flags, radix: 16)) stream \(stream), \(payload.count) bytes" }
}

/// A frame header alone, for lengths and types a `Frame` cannot carry.
func frameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32) -> [UInt8] {
    [UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length), type, flags] + be32(stream)
}

/// `value`, big-endian.
func be32(_ value: UInt32) -> [UInt8] {
    [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
}

/// The big-endian 32-bit number at `offset` in `bytes`.
func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
}

/// A SETTINGS frame with `settings` (identifier, value).
func settingsFrame(_ settings: [(UInt16, UInt32)] = []) -> [UInt8] {
    var payload: [UInt8] = []
    for (identifier, value) in settings {
        payload += [UInt8(truncatingIfNeeded: identifier >> 8), UInt8(truncatingIfNeeded: identifier)]
        payload += be32(value)
    }
    return Frame(.settings, payload).bytes
}

func windowUpdate(stream: UInt32, _ increment: UInt32) -> [UInt8] {
    Frame(.windowUpdate, stream: stream, be32(increment)).bytes
}

/// A SETTINGS frame's payload as identifier → value.
func settingsValues(_ payload: [UInt8]) throws -> [UInt16: UInt32] {
    try #require(payload.count % 6 == 0, "SETTINGS payload of \(payload.count) bytes")
    var values: [UInt16: UInt32] = [:]
    for offset in stride(from: 0, to: payload.count, by: 6) {
        values[UInt16(payload[offset]) << 8 | UInt16(payload[offset + 1])] = uint32(payload, at: offset + 2)
    }
    return values
}

/// The frames in `bytes`, which must hold whole frames and nothing else.
func frames(in bytes: [UInt8]) throws -> [Frame] {
    var frames: [Frame] = []
    var index = 0
    while index < bytes.count {
        try #require(bytes.count - index >= 9, "a partial frame header")
        let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
        let type = try #require(FrameType(rawValue: bytes[index + 3]), "unknown frame type \(bytes[index + 3])")
        let stream = uint32(bytes, at: index + 5)
        #expect(stream & 0x8000_0000 == 0, "reserved bit set")
        try #require(bytes.count - index - 9 >= length, "a partial frame payload")
        frames.append(Frame(type, flags: bytes[index + 4], stream: stream, Array(bytes[(index + 9)..<(index + 9 + length)])))
        index += 9 + length
    }
    return frames
}

/// The DATA payload bytes among `frames`.
func dataBytes(_ frames: some Sequence<Frame>) -> Int {
    frames.filter { $0.type == .data }.reduce(0) { $0 + $1.payload.count }
}

/// Decodes a header block to "name: value" lines.
func decode(_ block: [UInt8], _ decoder: inout HPACKDecoder) throws -> [String] {
    var buffer = ByteBuffer(bytes: block)
    return try decoder.decodeHeaders(from: &buffer).map { "\($0.name): \($0.value)" }
}

/// The server's HPACK encoder, as real servers use one: Huffman coding and a dynamic table.
struct Server {
    var encoder = HPACKEncoder(allocator: ByteBufferAllocator())

    /// The header block of `fields`.
    mutating func block(_ fields: [(String, String)]) throws -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: 256)
        try encoder.encode(headers: HPACKHeaders(fields), to: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// A HEADERS frame (END_HEADERS) carrying `fields`.
    mutating func headers(_ stream: UInt32, _ fields: [(String, String)], endStream: Bool = false) throws -> [UInt8] {
        let encoded = try block(fields)
        return Frame(.headers, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, encoded).bytes
    }
}

/// Feeds `bytes` to `session` in pieces of `piece` bytes; returns what it wrote and reported.
func feed(_ session: inout HTTP2ClientSession, _ bytes: [UInt8], piece: Int = 1 << 30) throws -> (written: [UInt8], events: [HTTP2Event]) {
    var written: [UInt8] = []
    var events: [HTTP2Event] = []
    var position = 0
    while position < bytes.count {
        let end = min(bytes.count, position + piece)
        try bytes[position..<end].withUnsafeBytes { raw in
            try session.receive(raw, into: &written) { events.append($0) }
        }
        position = end
    }
    return (written, events)
}

/// A session started, with the server's SETTINGS (`settings`) read and acknowledged.
func connectedSession(
    streamWindow: Int = HTTP2ClientSession.defaultWindow,
    connectionWindow: Int = HTTP2ClientSession.defaultWindow,
    settings: [(UInt16, UInt32)] = []
) throws -> HTTP2ClientSession {
    var session = HTTP2ClientSession(streamWindow: streamWindow, connectionWindow: connectionWindow)
    var out: [UInt8] = []
    session.start(into: &out)
    let (written, events) = try feed(&session, settingsFrame(settings))
    #expect(written == Frame(.settings, flags: 0x1).bytes)
    #expect(events.isEmpty)
    return session
}

private let getRoot = HTTP2Request(method: "GET", scheme: "https", authority: "localhost:8443", path: "/")

func post(_ body: [UInt8]) -> HTTP2Request {
    HTTP2Request(method: "POST", scheme: "https", authority: "localhost:8443", path: "/v1/upload", headers: [("Content-Type", "application/octet-stream")], body: body)
}

@Suite("HTTP/2 client framing, without I/O (the load tool's and the push connections')")
struct HTTP2ClientSessionTests {
    @Test("the preface, our SETTINGS and the connection's WINDOW_UPDATE parse back")
    func preface() throws {
        var session = HTTP2ClientSession()
        var out: [UInt8] = []
        session.start(into: &out)
        #expect(Array(out.prefix(24)) == Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8))
        let sent = try frames(in: Array(out.dropFirst(24)))
        try #require(sent.count == 2)
        #expect(sent[0].type == .settings && sent[0].flags == 0 && sent[0].stream == 0)
        #expect(try settingsValues(sent[0].payload) == [0x2: 0, 0x4: (1 << 30) - 1, 0x6: 65_536])
        #expect(sent[1] == Frame(.windowUpdate, be32((1 << 30) - 1 - 65_535)))

        // A connection window left at its initial 65,535 needs no WINDOW_UPDATE.
        var small = HTTP2ClientSession(streamWindow: 100_000, connectionWindow: 65_535)
        var smallOut: [UInt8] = []
        small.start(into: &smallOut)
        let smallSent = try frames(in: Array(smallOut.dropFirst(24)))
        try #require(smallSent.map(\.type) == [.settings])
        #expect(try settingsValues(smallSent[0].payload)[0x4] == 100_000)
    }

    @Test("a request's HEADERS decode to its pseudo-headers and headers, connection headers dropped")
    func requestHeaders() throws {
        let body = Array(#"{"a":1}"#.utf8)
        let request = HTTP2Request(
            method: "POST", scheme: "https", authority: "push.example:8443", path: "/v1/send",
            headers: [("Host", "elsewhere"), ("Content-Type", "application/json"), ("Connection", "keep-alive"),
                      ("Authorization", "Bearer abc"), ("X-Trace", "Ü 1"), ("Content-Length", "999"),
                      ("Transfer-Encoding", "chunked"), ("TE", "trailers"), ("Upgrade", "h2c"), ("User-Agent", "bench")],
            body: body
        )
        var session = try connectedSession()
        var out: [UInt8] = []
        let first = session.open(request, into: &out)
        let second = session.open(HTTP2Request(method: "GET", scheme: "http", authority: "", path: "/", headers: [("host", "a")]), into: &out)
        #expect(first == 1 && second == 3)
        let sent = try frames(in: out)
        try #require(sent.count == 3)
        #expect(sent[0].type == .headers && sent[0].stream == 1 && sent[0].flags == 0x4)
        #expect(sent[1] == Frame(.data, flags: 0x1, stream: 1, body))
        #expect(sent[2].type == .headers && sent[2].stream == 3 && sent[2].flags == 0x5)

        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        #expect(try decode(sent[0].payload, &decoder) == [
            ":method: POST", ":scheme: https", ":authority: push.example:8443", ":path: /v1/send",
            "content-type: application/json", "authorization: Bearer abc", "x-trace: Ü 1", "te: trailers",
            "user-agent: bench", "content-length: 7",
        ])
        #expect(try decode(sent[2].payload, &decoder) == [":method: GET", ":scheme: http", ":authority: a", ":path: /"])
        // The connection's first block sets the dynamic table to 0; the request's own block does not.
        #expect(sent[0].payload.first == 0x20)
        #expect(Array(sent[0].payload.dropFirst()) == request.headerBlock)
        // Whole static-table entries are indexed: GET, http, / (and POST, https).
        #expect(sent[2].payload == [0x82, 0x86, 0x01, 0x01, UInt8(ascii: "a"), 0x84])
        #expect(Array(request.headerBlock.prefix(2)) == [0x83, 0x87])
    }

    @Test("a header block over the server's MAX_FRAME_SIZE goes in HEADERS then CONTINUATION frames")
    func continuationSent() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        let value = String(repeating: "v", count: 40_000)
        _ = session.open(HTTP2Request(method: "GET", scheme: "https", authority: "a", path: "/big", headers: [("x-big", value)]), into: &out)
        let sent = try frames(in: out)
        #expect(sent.map(\.type) == [.headers, .continuation, .continuation])
        #expect(sent.map(\.flags) == [0x1, 0, 0x4])
        #expect(sent.allSatisfy { $0.stream == 1 && $0.payload.count <= 16_384 })
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize, maxHeaderListSize: 1 << 20)
        #expect(try decode(Array(sent.map(\.payload).joined()), &decoder) == [":method: GET", ":scheme: https", ":authority: a", ":path: /big", "x-big: \(value)"])
    }

    static let pieces = [1, 2, 3, 8, 9, 10, 17, 1 << 20]

    @Test("a response read a byte at a time, or in any split, ends once", arguments: pieces)
    func responseInPieces(piece: Int) throws {
        var session = HTTP2ClientSession()
        var out: [UInt8] = []
        session.start(into: &out)
        // Streams may open before the server's SETTINGS arrive.
        let id = session.open(getRoot, into: &out)
        #expect(id == 1)
        var server = Server()
        let headers = try server.headers(1, [(":status", "200"), ("content-type", "text/plain")])
        let padded: [UInt8] = [3, UInt8(ascii: "!"), 0, 0, 0]
        let bytes = Array([
            settingsFrame([(0x3, 100)]), headers, Frame(.data, stream: 1, Array("hello".utf8)).bytes,
            Frame(.data, flags: 0x1 | 0x8, stream: 1, padded).bytes,
        ].joined())
        let (written, events) = try feed(&session, bytes, piece: piece)
        #expect(events == [.response(stream: 1, status: 200)])
        #expect(written == Frame(.settings, flags: 0x1).bytes)
        #expect(session.openStreams == 0)
    }

    @Test("an interim 100 then a 404 ends with the 404; HEADERS padding and priority are skipped")
    func interimResponse() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        var server = Server()
        let interim = try server.headers(1, [(":status", "100")])
        #expect(try feed(&session, interim).events.isEmpty)
        #expect(session.openStreams == 1)
        // PADDED (4 bytes) and PRIORITY (exclusive, on stream 0, weight 16).
        var payload: [UInt8] = [4, 0x80, 0, 0, 0, 0x10]
        payload += try server.block([(":status", "404"), ("content-length", "0")])
        payload += [0, 0, 0, 0]
        let finalResponse = Frame(.headers, flags: 0x1 | 0x4 | 0x8 | 0x20, stream: 1, payload).bytes
        #expect(try feed(&session, finalResponse).events == [.response(stream: 1, status: 404)])
        #expect(session.openStreams == 0)
    }

    @Test("trailers end a response, their block split across HEADERS and CONTINUATION")
    func trailers() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        var server = Server()
        let head = try server.headers(1, [(":status", "200"), ("content-type", "application/grpc")])
        let data = Frame(.data, stream: 1, [0, 0, 0, 0, 2, 0x08, 0x01]).bytes
        #expect(try feed(&session, head + data).events.isEmpty)
        let block = try server.block([("grpc-status", "0"), ("grpc-message", "all fine here")])
        let split = Frame(.headers, flags: 0x1, stream: 1, Array(block.prefix(3))).bytes
            + Frame(.continuation, flags: 0x4, stream: 1, Array(block.dropFirst(3))).bytes
        #expect(try feed(&session, split, piece: 5).events == [.response(stream: 1, status: 200)])
    }

    @Test("PING is answered with an ACK carrying the same eight bytes; a PING ACK is not")
    func ping() throws {
        var session = try connectedSession()
        let payload: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        #expect(try frames(in: feed(&session, Frame(.ping, payload).bytes).written) == [Frame(.ping, flags: 0x1, payload)])
        #expect(try feed(&session, Frame(.ping, flags: 0x1, payload).bytes).written.isEmpty)
    }

    @Test("SETTINGS are acknowledged, and MAX_CONCURRENT_STREAMS bounds the open streams")
    func maxConcurrentStreams() throws {
        var session = HTTP2ClientSession()
        var out: [UInt8] = []
        session.start(into: &out)
        #expect(session.canOpen)
        #expect(try feed(&session, settingsFrame([(0x3, 2), (0x1, 0), (0x99, 7)])).written == Frame(.settings, flags: 0x1).bytes)
        #expect(session.peerMaxConcurrentStreams == 2)
        let first = session.open(getRoot, into: &out)
        #expect(first == 1 && session.canOpen)
        let second = session.open(getRoot, into: &out)
        #expect(second == 3)
        #expect(!session.canOpen && session.openStreams == 2)
        // The ACK of our SETTINGS needs no answer.
        #expect(try feed(&session, Frame(.settings, flags: 0x1).bytes).written.isEmpty)
        var server = Server()
        let ended = try server.headers(3, [(":status", "204")], endStream: true)
        #expect(try feed(&session, ended).events == [.response(stream: 3, status: 204)])
        #expect(session.canOpen && session.openStreams == 1)
    }

    @Test("a body over the server's windows waits for WINDOW_UPDATEs, then goes out whole")
    func sendFlowControl() throws {
        var session = try connectedSession()
        let body = (0..<100_000).map { UInt8(truncatingIfNeeded: $0) }
        var out: [UInt8] = []
        let id = session.open(post(body), into: &out)
        #expect(id == 1)
        let first = try frames(in: out)
        #expect(first.first?.type == .headers && first.first?.flags == 0x4)
        #expect(first.dropFirst().allSatisfy { $0.type == .data && $0.stream == 1 && $0.flags == 0 && $0.payload.count <= 16_384 })
        #expect(dataBytes(first) == 65_535)

        // The stream's window opens, the connection's is still shut: nothing goes.
        #expect(try feed(&session, windowUpdate(stream: 1, 100_000)).written.isEmpty)
        let rest = try frames(in: feed(&session, windowUpdate(stream: 0, 40_000)).written)
        #expect(dataBytes(rest) == 34_465)
        #expect(rest.last?.flags == 0x1)
        #expect(rest.dropLast().allSatisfy { $0.flags == 0 })
        #expect(Array((first.dropFirst() + rest).map(\.payload).joined()) == body)
        #expect(try feed(&session, windowUpdate(stream: 0, 1_000)).written.isEmpty)
    }

    @Test("SETTINGS_INITIAL_WINDOW_SIZE moves open streams' windows; MAX_FRAME_SIZE sizes the DATA")
    func sendSettings() throws {
        var session = try connectedSession(settings: [(0x4, 1_000)])
        var out: [UInt8] = []
        _ = session.open(post([UInt8](repeating: 7, count: 5_000)), into: &out)
        #expect(try dataBytes(frames(in: out)) == 1_000)
        let raised = try frames(in: feed(&session, settingsFrame([(0x4, 3_000)])).written)
        #expect(raised.first == Frame(.settings, flags: 0x1))
        #expect(raised.dropFirst().map(\.payload.count) == [2_000])
        let last = try frames(in: feed(&session, windowUpdate(stream: 1, 2_000)).written)
        #expect(last.map(\.payload.count) == [2_000])
        #expect(last.map(\.flags) == [0x1])

        var large = try connectedSession(settings: [(0x4, 100_000), (0x5, 20_000)])
        out = []
        _ = large.open(post([UInt8](repeating: 1, count: 50_000)), into: &out)
        let sized = try frames(in: out)
        #expect(sized.map(\.type) == [.headers, .data, .data, .data])
        #expect(sized.dropFirst().map(\.payload.count) == [20_000, 20_000, 10_000])
        #expect(sized.dropFirst().map(\.flags) == [0, 0, 0x1])
    }

    @Test("a response that ends before the request's body is sent resets the stream (CANCEL)")
    func earlyResponse() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        _ = session.open(post([UInt8](repeating: 0, count: 100_000)), into: &out)
        var server = Server()
        let refused = try server.headers(1, [(":status", "413")], endStream: true)
        let (written, events) = try feed(&session, refused)
        #expect(events == [.response(stream: 1, status: 413)])
        #expect(try frames(in: written) == [Frame(.rstStream, stream: 1, be32(0x8))])
        #expect(try feed(&session, windowUpdate(stream: 0, 100_000)).written.isEmpty)
        #expect(session.openStreams == 0)
    }

    @Test("GOAWAY resets the streams above its last-stream-id; finished once the others end")
    func goAway() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        var ids: [UInt32] = []
        for _ in 0..<3 { ids.append(session.open(getRoot, into: &out)) }
        #expect(ids == [1, 3, 5])
        let (written, events) = try feed(&session, Frame(.goAway, be32(3) + be32(0)).bytes)
        #expect(written.isEmpty)
        #expect(events == [.reset(stream: 5, code: 7)])
        #expect(!session.canOpen && !session.finished && session.openStreams == 2)
        #expect(session.goAwayCode == 0)
        var server = Server()
        let first = try server.headers(1, [(":status", "200")], endStream: true)
        #expect(try feed(&session, first).events == [.response(stream: 1, status: 200)])
        #expect(!session.finished)
        let second = try server.headers(3, [(":status", "503")], endStream: true)
        #expect(try feed(&session, second).events == [.response(stream: 3, status: 503)])
        #expect(session.finished && !session.canOpen)
    }

    @Test("RST_STREAM reports the reset; what was in flight on the stream is ignored, HPACK kept in step")
    func resetStream() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        _ = session.open(getRoot, into: &out)
        #expect(try feed(&session, Frame(.rstStream, stream: 1, be32(0x2)).bytes).events == [.reset(stream: 1, code: 2)])
        #expect(session.openStreams == 1)
        var server = Server()
        // The late block adds "x-late: yes" to the server's dynamic table; stream 3's refers to it.
        let late = try server.headers(1, [(":status", "200"), ("x-late", "yes")])
        let lateData = Frame(.data, flags: 0x1, stream: 1, [1, 2, 3]).bytes
        let lateReset = Frame(.rstStream, stream: 1, be32(0x8)).bytes
        #expect(try feed(&session, late + lateData + lateReset).events.isEmpty)
        let answer = try server.headers(3, [(":status", "201"), ("x-late", "yes")], endStream: true)
        #expect(try feed(&session, answer).events == [.response(stream: 3, status: 201)])
    }

    @Test("a frame over 16 KiB is a FRAME_SIZE_ERROR, whatever its type")
    func oversizedFrame() throws {
        for type: UInt8 in [0x0, 0x1, 0x6, 0xEE] {
            var session = try connectedSession()
            var out: [UInt8] = []
            _ = session.open(getRoot, into: &out)
            let error = #expect(throws: HTTP2ProtocolError.self) {
                try feed(&session, frameHeader(length: 16_385, type: type, flags: 0, stream: 1))
            }
            #expect(error?.code == 0x6)
        }
    }

    @Test("a header block that never ends is refused past 64 KiB")
    func endlessHeaderBlock() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        let fragment = [UInt8](repeating: 0, count: 16_384)
        _ = try feed(&session, Frame(.headers, stream: 1, fragment).bytes)
        for _ in 0..<3 { _ = try feed(&session, Frame(.continuation, stream: 1, fragment).bytes) }
        let error = #expect(throws: HTTP2ProtocolError.self) {
            try feed(&session, Frame(.continuation, stream: 1, [0]).bytes)
        }
        #expect(error?.code == 0x1)
    }

    @Test("the connection's window is replenished once more than half of it is consumed")
    func connectionWindowUpdate() throws {
        var session = try connectedSession(connectionWindow: 65_535)
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        var server = Server()
        let head = try server.headers(1, [(":status", "200")])
        let chunk = Frame(.data, stream: 1, [UInt8](repeating: 0, count: 16_384)).bytes
        #expect(try feed(&session, head + chunk).written.isEmpty)
        #expect(try frames(in: feed(&session, chunk).written) == [Frame(.windowUpdate, be32(32_768))])
        #expect(try feed(&session, chunk).written.isEmpty)
        #expect(try feed(&session, Frame(.data, flags: 0x1, stream: 1).bytes).events == [.response(stream: 1, status: 200)])
    }

    @Test("a stream's window is replenished past half of it, padding counted; overrunning it is an error")
    func streamWindowUpdate() throws {
        var session = try connectedSession(streamWindow: 20_000)
        var out: [UInt8] = []
        _ = session.open(getRoot, into: &out)
        var server = Server()
        let head = try server.headers(1, [(":status", "200")])
        #expect(try feed(&session, head + Frame(.data, stream: 1, [UInt8](repeating: 0, count: 10_000)).bytes).written.isEmpty)
        // One byte of DATA: the pad length alone.
        let written = try feed(&session, Frame(.data, flags: 0x8, stream: 1, [0]).bytes).written
        #expect(try frames(in: written) == [Frame(.windowUpdate, stream: 1, be32(10_001))])

        var small = try connectedSession(streamWindow: 1_000)
        _ = small.open(getRoot, into: &out)
        var smallServer = Server()
        let smallHead = try smallServer.headers(1, [(":status", "200")])
        _ = try feed(&small, smallHead)
        let error = #expect(throws: HTTP2ProtocolError.self) {
            try feed(&small, Frame(.data, stream: 1, [UInt8](repeating: 0, count: 1_001)).bytes)
        }
        #expect(error?.code == 0x3)
    }

    @Test("a server that does not start with SETTINGS is not spoken to")
    func notHTTP2() {
        var session = HTTP2ClientSession()
        var out: [UInt8] = []
        session.start(into: &out)
        let error = #expect(throws: HTTP2ProtocolError.self) {
            try feed(&session, Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        }
        #expect(error?.description.contains("HTTP/1") == true)
        var other = HTTP2ClientSession()
        other.start(into: &out)
        #expect(throws: HTTP2ProtocolError.self) { try feed(&other, Frame(.ping, [UInt8](repeating: 0, count: 8)).bytes) }
    }

    @Test("a malformed response resets its stream only")
    func malformedResponse() throws {
        var session = try connectedSession()
        var out: [UInt8] = []
        for _ in 0..<3 { _ = session.open(getRoot, into: &out) }
        var server = Server()
        let noStatus = try server.headers(1, [("content-type", "text/plain")])
        let dataFirst = Frame(.data, flags: 0x1, stream: 3, [1]).bytes
        let interimEnd = try server.headers(5, [(":status", "103")], endStream: true)
        let (written, events) = try feed(&session, noStatus + dataFirst + interimEnd)
        #expect(events == [.reset(stream: 1, code: 1), .reset(stream: 3, code: 1), .reset(stream: 5, code: 1)])
        #expect(try frames(in: written) == [1, 3, 5].map { Frame(.rstStream, stream: $0, be32(0x1)) })
        #expect(session.openStreams == 0 && session.canOpen)
    }

    /// Bytes a hostile or broken server sends once stream 1 is open, and the error code they earn.
    struct Hostile: CustomTestStringConvertible, Sendable {
        let label: String
        let bytes: [UInt8]
        let code: UInt32
        var testDescription: String { label }
    }

    static let hostile = [
        Hostile(label: "frame over 16 KiB", bytes: frameHeader(length: 16_385, type: 0x0, flags: 0, stream: 1), code: 0x6),
        Hostile(label: "PUSH_PROMISE", bytes: Frame(.pushPromise, flags: 0x4, stream: 1, be32(2) + [0x88]).bytes, code: 0x1),
        Hostile(label: "HPACK index 0", bytes: Frame(.headers, flags: 0x5, stream: 1, [0x80]).bytes, code: 0x9),
        Hostile(label: "HPACK index past the tables", bytes: Frame(.headers, flags: 0x5, stream: 1, [0xFF, 0x40]).bytes, code: 0x9),
        Hostile(label: "CONTINUATION interrupted", bytes: Frame(.headers, stream: 1, [0x88]).bytes + Frame(.ping, [UInt8](repeating: 0, count: 8)).bytes, code: 0x1),
        Hostile(label: "CONTINUATION on another stream", bytes: Frame(.headers, stream: 1, [0x88]).bytes + Frame(.continuation, flags: 0x4, stream: 3).bytes, code: 0x1),
        Hostile(label: "CONTINUATION without HEADERS", bytes: Frame(.continuation, flags: 0x4, stream: 1, [0x88]).bytes, code: 0x1),
        Hostile(label: "HEADERS on a stream never opened", bytes: Frame(.headers, flags: 0x5, stream: 3, [0x88]).bytes, code: 0x1),
        Hostile(label: "HEADERS on a server stream", bytes: Frame(.headers, flags: 0x5, stream: 2, [0x88]).bytes, code: 0x1),
        Hostile(label: "HEADERS padding too long", bytes: Frame(.headers, flags: 0x5 | 0x8, stream: 1, [2, 0x88]).bytes, code: 0x1),
        Hostile(label: "DATA on stream 0", bytes: Frame(.data, stream: 0, [1]).bytes, code: 0x1),
        Hostile(label: "DATA on a stream never opened", bytes: Frame(.data, stream: 7, [1]).bytes, code: 0x1),
        Hostile(label: "DATA padding too long", bytes: Frame(.data, flags: 0x8, stream: 1, [2, 0]).bytes, code: 0x1),
        Hostile(label: "SETTINGS of 5 bytes", bytes: Frame(.settings, [0, 3, 0, 0, 1]).bytes, code: 0x6),
        Hostile(label: "SETTINGS on a stream", bytes: Frame(.settings, stream: 1).bytes, code: 0x1),
        Hostile(label: "SETTINGS_ENABLE_PUSH 1", bytes: settingsFrame([(0x2, 1)]), code: 0x1),
        Hostile(label: "SETTINGS_INITIAL_WINDOW_SIZE 2^31", bytes: settingsFrame([(0x4, 1 << 31)]), code: 0x3),
        Hostile(label: "SETTINGS_MAX_FRAME_SIZE 16383", bytes: settingsFrame([(0x5, 16_383)]), code: 0x1),
        Hostile(label: "PING of 7 bytes", bytes: Frame(.ping, [UInt8](repeating: 0, count: 7)).bytes, code: 0x6),
        Hostile(label: "connection WINDOW_UPDATE of 0", bytes: windowUpdate(stream: 0, 0), code: 0x1),
        Hostile(label: "connection window past 2^31 - 1", bytes: windowUpdate(stream: 0, 0x7FFF_FFFF), code: 0x3),
        Hostile(label: "WINDOW_UPDATE on a stream never opened", bytes: windowUpdate(stream: 9, 1), code: 0x1),
        Hostile(label: "GOAWAY of 4 bytes", bytes: Frame(.goAway, be32(1)).bytes, code: 0x6),
        Hostile(label: "RST_STREAM on a stream never opened", bytes: Frame(.rstStream, stream: 5, be32(0)).bytes, code: 0x1),
        Hostile(label: "RST_STREAM of 3 bytes", bytes: Frame(.rstStream, stream: 1, [0, 0, 0]).bytes, code: 0x6),
    ]

    @Test("protocol errors are connection errors with their RFC 9113 code", arguments: hostile)
    func hostileServer(_ hostile: Hostile) throws {
        for piece in [1, 4096] {
            var session = try connectedSession()
            var out: [UInt8] = []
            _ = session.open(getRoot, into: &out)
            let error = #expect(throws: HTTP2ProtocolError.self, "\(hostile.label) in pieces of \(piece)") {
                try feed(&session, hostile.bytes, piece: piece)
            }
            #expect(error?.code == hostile.code, "\(String(describing: error))")
        }
    }
}
