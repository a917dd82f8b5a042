@testable import HTTP2Client
import NIOCore
import NIOHPACK
import Testing

// What a push connection asks of the session beyond the load tool: header blocks that use HPACK's
// dynamic table (decoded here by NIOHPACK's decoder, as a server would), and answers kept whole.

/// A session as the push connection makes it: answers kept up to `limit`, a 4,096-byte table.
private func pushSession(limit: Int = 16 * 1024, settings: [(UInt16, UInt32)] = []) throws -> HTTP2ClientSession {
    var session = HTTP2ClientSession(streamWindow: 65_536, connectionWindow: 1 << 20, responseBodyLimit: limit, headerTableSize: 4_096)
    var out: [UInt8] = []
    session.start(into: &out)
    _ = try feed(&session, settingsFrame(settings))
    return session
}

/// The fields an APNs push sends, as `APNsClient` marks them: the token and topic repeat, the
/// request id and expiration do not.
private func pushFields(_ n: Int, jwt: String = String(repeating: "j", count: 220)) -> [HTTP2HeaderField] {
    [
        HTTP2HeaderField("authorization", "bearer \(jwt)", indexed: true),
        HTTP2HeaderField("apns-topic", "com.example.app", indexed: true),
        HTTP2HeaderField("apns-push-type", "alert", indexed: true),
        HTTP2HeaderField("apns-priority", "10", indexed: true),
        HTTP2HeaderField("apns-expiration", "\(1_800_000_000 + n)", indexed: false),
        HTTP2HeaderField("apns-id", "0000-\(n)", indexed: false),
        HTTP2HeaderField("content-type", "application/json", indexed: true),
    ]
}

/// Each HEADERS frame's block in `bytes` (whole frames), decoded in order by one decoder.
private func decodedBlocks(_ bytes: [UInt8], _ decoder: inout HPACKDecoder) throws -> [(stream: UInt32, fields: [String], size: Int)] {
    try frames(in: bytes).filter { $0.type == .headers }.map { ($0.stream, try decode($0.payload, &decoder), $0.payload.count) }
}

@Suite("HTTP/2 client framing for push connections: HPACK's dynamic table, answers kept whole")
struct PushSessionTests {
    @Test("300 pushes decode exactly as sent; the repeated fields shrink to an index each, the varying ones are never indexed")
    func repeatedFieldsIndexed() throws {
        var session = try pushSession()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var out: [UInt8] = []
        for n in 0..<300 {
            let body = Array(#"{"aps":{"alert":"\#(n)"}}"#.utf8)
            _ = session.open(method: "POST", scheme: "https", authority: "api.push.apple.com", path: "/3/device/\(String(repeating: "ab", count: 32))\(n)",
                             headers: pushFields(n), body: body, into: &out)
        }
        let blocks = try decodedBlocks(out, &decoder)
        try #require(blocks.count == 300)
        for (n, block) in blocks.enumerated() {
            #expect(block.stream == UInt32(2 * n + 1))
            let expected = [":method: POST", ":scheme: https", ":authority: api.push.apple.com", ":path: /3/device/\(String(repeating: "ab", count: 32))\(n)"]
                + pushFields(n).map { "\($0.name): \($0.value)" }
                + ["content-length: \(#"{"aps":{"alert":"\#(n)"}}"#.utf8.count)"]
            #expect(block.fields == expected)
        }
        // The first block carries the token whole; later ones an index for it and every repeated field.
        #expect(blocks[0].size > 300)
        #expect(blocks[1].size < 140, "a later block is \(blocks[1].size) bytes")
    }

    @Test("fields that change all the time still decode when the table evicts: 400 distinct indexed values of ~100 bytes")
    func eviction() throws {
        var session = try pushSession()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var out: [UInt8] = []
        for n in 0..<400 {
            let fields = [HTTP2HeaderField("x-value", "\(n % 57)-" + String(repeating: "v", count: 90), indexed: true),
                          HTTP2HeaderField("apns-topic", "com.example.app", indexed: true)]
            _ = session.open(method: "POST", scheme: "https", authority: "a", path: "/\(n)", headers: fields, body: nil, into: &out)
        }
        let blocks = try decodedBlocks(out, &decoder)
        try #require(blocks.count == 400)
        for (n, block) in blocks.enumerated() {
            #expect(block.fields == [":method: POST", ":scheme: https", ":authority: a", ":path: /\(n)",
                                     "x-value: \(n % 57)-" + String(repeating: "v", count: 90), "apns-topic: com.example.app"])
        }
    }

    @Test("a server's SETTINGS_HEADER_TABLE_SIZE lowers the table: the next block starts with the size update, and nothing evicted is referred to")
    func peerLowersTable() throws {
        var session = try pushSession()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var out: [UInt8] = []
        _ = session.open(method: "POST", scheme: "https", authority: "a", path: "/1", headers: pushFields(1), body: nil, into: &out)
        _ = try decodedBlocks(out, &decoder)

        // The server allows 64 bytes (its decoder's table shrinks to that, dropping the token):
        // the 250-byte token no longer fits, and is sent whole, not added.
        _ = try feed(&session, settingsFrame([(0x1, 64)]))
        decoder.maxDynamicTableLength = 64
        out.removeAll()
        _ = session.open(method: "POST", scheme: "https", authority: "a", path: "/2", headers: pushFields(2), body: nil, into: &out)
        let block = try #require(try frames(in: out).first { $0.type == .headers }).payload
        #expect(block.first == 0x20 | 31 && block[1] == 64 - 31, "the block starts with a size update to 64")
        var copy = decoder
        #expect(try decode(block, &copy).contains("authorization: bearer " + String(repeating: "j", count: 220)))

        // Down to 0 and back up to 4,096 between two blocks: both updates, the smaller first (RFC 7541 §4.2).
        _ = try feed(&session, settingsFrame([(0x1, 0)]))
        _ = try feed(&session, settingsFrame([(0x1, 4_096)]))
        out.removeAll()
        _ = session.open(method: "POST", scheme: "https", authority: "a", path: "/3", headers: pushFields(3), body: nil, into: &out)
        let both = try #require(try frames(in: out).first { $0.type == .headers }).payload
        #expect(Array(both.prefix(4)) == [0x20, 0x3F, 0xE1, 0x1F])
        copy.maxDynamicTableLength = 4_096
        #expect(try decode(both, &copy).count == 11)
    }

    @Test("an answer is kept whole: its headers, and its body without padding, in any split of the bytes", arguments: [1, 2, 7, 1 << 30])
    func answerKept(piece: Int) throws {
        var session = try pushSession()
        var out: [UInt8] = []
        let id = session.open(method: "POST", scheme: "https", authority: "a", path: "/3/device/x", headers: pushFields(1), body: [0x7B, 0x7D], into: &out)
        var server = Server()
        var bytes = try server.headers(id, [(":status", "400"), ("apns-id", "ABC")])
        let reason = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        // Padded: a pad length byte, the data, then 5 bytes of padding.
        bytes += Frame(.data, flags: 0x8, stream: id, [5] + reason.prefix(10) + [0, 0, 0, 0, 0]).bytes
        bytes += Frame(.data, flags: 0x1, stream: id, Array(reason.dropFirst(10))).bytes
        let (_, events) = try feed(&session, bytes, piece: piece)
        try #require(events.count == 1)
        guard case .answer(let answer) = events[0] else { Issue.record("\(events[0])"); return }
        #expect(answer.stream == id && answer.status == 400)
        #expect(answer.headers.first(name: "apns-id") == "ABC")
        #expect(answer.body == reason)
        #expect(session.openStreams == 0)
    }

    @Test("an answer past the body limit resets its stream (CANCEL) and says so; the connection goes on")
    func tooLarge() throws {
        var session = try pushSession(limit: 100)
        var out: [UInt8] = []
        let big = session.open(method: "POST", scheme: "https", authority: "a", path: "/big", headers: [], body: nil, into: &out)
        let small = session.open(method: "POST", scheme: "https", authority: "a", path: "/small", headers: [], body: nil, into: &out)
        var server = Server()
        var bytes = try server.headers(big, [(":status", "200")])
        bytes += Frame(.data, stream: big, [UInt8](repeating: 0x78, count: 60)).bytes
        bytes += Frame(.data, stream: big, [UInt8](repeating: 0x78, count: 60)).bytes
        bytes += try server.headers(small, [(":status", "200")], endStream: true)
        let (written, events) = try feed(&session, bytes)
        #expect(events.count == 2)
        #expect(events.first == .tooLarge(stream: big))
        guard case .answer(let answer) = events.last else { Issue.record("\(events)"); return }
        #expect(answer.stream == small && answer.body.isEmpty)
        #expect(try frames(in: written).contains(Frame(.rstStream, stream: big, be32(0x8))))
    }

    @Test("cancel resets an open stream (its later frames ignored) and is false for one that is not open")
    func cancel() throws {
        var session = try pushSession()
        var out: [UInt8] = []
        let id = session.open(method: "POST", scheme: "https", authority: "a", path: "/", headers: [], body: nil, into: &out)
        out.removeAll()
        #expect(session.cancel(stream: id, into: &out))
        #expect(try frames(in: out) == [Frame(.rstStream, stream: id, be32(0x8))])
        #expect(!session.cancel(stream: id, into: &out))
        var server = Server()
        let (_, events) = try feed(&session, try server.headers(id, [(":status", "200")], endStream: true))
        #expect(events.isEmpty)
    }
}
