import NIOCore
import NIOHPACK

/// The client side of one HTTP/2 connection, without I/O: what to write to open streams, and what
/// the server's bytes mean. The caller writes the bytes that `start`, `open` and `receive` append
/// to `out`, in order, and feeds `receive` whatever it reads.
///
/// Made for many streams at once. A load generator's responses are only counted (bodies are
/// skipped as they arrive, never buffered); a push connection's are kept whole, up to a
/// `responseBodyLimit`, with their headers. Our receive windows are large (h2load's 2^30 - 1 by
/// default) and are replenished once half of them is consumed; sending respects the server's
/// windows and frame size, and keeps what does not fit until a WINDOW_UPDATE (or SETTINGS) lets it
/// go. Server push is disabled. Hostile input is bounded: frames at most 16 KiB (our
/// SETTINGS_MAX_FRAME_SIZE), header blocks at most 64 KiB, encoded or decoded.
public struct HTTP2ClientSession: Sendable {
    /// Our default receive window, for each stream and for the connection: h2load's 2^30 - 1.
    public static let defaultWindow = (1 << 30) - 1
    /// The largest header block we take, encoded (HEADERS and CONTINUATION fragments) or decoded
    /// (RFC 9113 header list size, which we announce as SETTINGS_MAX_HEADER_LIST_SIZE).
    public static let maxHeaderBytes = 64 * 1024

    // Our side.
    /// Our SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
    let streamWindow: Int
    /// The connection's receive window.
    let connectionWindow: Int
    /// Responses are kept whole up to this many body bytes; nil: bodies are skipped, only statuses told.
    let responseBodyLimit: Int?
    /// `start(into:)` was called.
    public internal(set) var started = false
    /// Our side of HPACK's dynamic table.
    var encoder: HeaderTableEncoder
    /// A header block being encoded (kept for its capacity).
    var scratch: [UInt8] = []
    var nextStreamID: UInt32 = 1
    /// The highest stream id opened: higher (or even) ids are idle, lower ones not in `streams` closed.
    var lastOpenedID: UInt32 = 0
    /// The open streams, in the order they were opened (a connection has few).
    var streams: [StreamState] = []
    /// Streams whose body is not all sent.
    var streamsWithPendingData = 0
    /// Flow-controlled bytes received on the connection since our last connection WINDOW_UPDATE.
    var connectionReceived = 0

    // The server's side.
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS: unlimited until it says.
    public internal(set) var peerMaxConcurrentStreams = Int.max
    var peerInitialWindow = HTTP2Wire.defaultWindow
    var peerMaxFrameSize = HTTP2Wire.maxFrameSize
    /// What the server lets us send on the connection.
    var connectionSendWindow = HTTP2Wire.defaultWindow
    /// The server's first SETTINGS have arrived whole and been applied.
    public internal(set) var peerSettingsReceived = false
    /// The server's first frame was seen to be SETTINGS (its header: the payload may still be coming).
    var firstFrameChecked = false
    /// The lowest last-stream-id of the GOAWAYs received.
    public internal(set) var goAwayLastStreamID: UInt32?
    /// The error code of the last GOAWAY received (NO_ERROR for a graceful shutdown), if any.
    public internal(set) var goAwayCode: UInt32?

    // Reading.
    /// A frame's start not yet complete: its header, or (not DATA) its header and payload so far.
    var input: [UInt8] = []
    /// The DATA frame being skipped: its stream, flags, payload length and bytes still to come.
    var dataStream: UInt32 = 0
    var dataFlags: UInt8 = 0
    var dataLength = 0
    var dataRemaining = 0
    /// The bytes of the DATA frame's payload still to come that are data, not padding.
    var dataContentRemaining = 0
    /// The DATA frame is padded and its pad length byte has not arrived yet.
    var dataPadLengthUnread = false
    /// One HPACK decoder for the connection: every header block goes through it, in order.
    var decoder: HPACKDecoder
    /// The header block being gathered from HEADERS and CONTINUATION frames.
    var headerBlock: ByteBuffer
    var headerBlockStream: UInt32 = 0
    var headerBlockEndsStream = false
    /// The stream whose CONTINUATION must come next, or 0.
    var continuationStream: UInt32 = 0

    /// A session with receive windows of `streamWindow` for each stream (announced as
    /// SETTINGS_INITIAL_WINDOW_SIZE) and `connectionWindow` for the connection (at least the
    /// 65,535 it starts with; raised by a WINDOW_UPDATE in `start`).
    ///
    /// With a `responseBodyLimit`, responses are reported whole (`HTTP2Event.answer`), a body
    /// past the limit resetting its stream (`HTTP2Event.tooLarge`); without, bodies are skipped.
    /// `headerTableSize` is the most of HPACK's dynamic table our requests use (0: none; the
    /// peer's SETTINGS_HEADER_TABLE_SIZE may lower it).
    public init(streamWindow: Int = HTTP2ClientSession.defaultWindow, connectionWindow: Int = HTTP2ClientSession.defaultWindow,
                responseBodyLimit: Int? = nil, headerTableSize: Int = 0) {
        precondition((1...HTTP2Wire.maxWindow).contains(streamWindow), "stream window out of range")
        precondition((HTTP2Wire.defaultWindow...HTTP2Wire.maxWindow).contains(connectionWindow), "connection window out of range")
        self.streamWindow = streamWindow
        self.connectionWindow = connectionWindow
        self.responseBodyLimit = responseBodyLimit
        encoder = HeaderTableEncoder(capacity: headerTableSize)
        scratch.reserveCapacity(512)
        decoder = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: Self.maxHeaderBytes
        )
        headerBlock = ByteBufferAllocator().buffer(capacity: 256)
        input.reserveCapacity(256)
    }

    /// Streams open now: opened, and neither answered in full nor reset.
    public var openStreams: Int { streams.count }

    /// Whether another stream may be opened: fewer open than the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until its SETTINGS arrive, which may come after
    /// our first streams: RFC 9113 allows that), no GOAWAY received, and stream ids left.
    public var canOpen: Bool {
        goAwayLastStreamID == nil && nextStreamID <= HTTP2Wire.maxStreamID && streams.count < peerMaxConcurrentStreams
    }

    /// True once no stream will ever open again (after a GOAWAY, or with stream ids exhausted) and
    /// every stream has ended: the connection should be closed and replaced.
    public var finished: Bool {
        streams.isEmpty && (goAwayLastStreamID != nil || nextStreamID > HTTP2Wire.maxStreamID)
    }

    /// Appends the client connection preface, our SETTINGS (ENABLE_PUSH 0, INITIAL_WINDOW_SIZE,
    /// MAX_HEADER_LIST_SIZE) and a WINDOW_UPDATE raising the connection's receive window. Once, first.
    public mutating func start(into out: inout [UInt8]) {
        precondition(!started, "HTTP2ClientSession.start(into:) called twice")
        started = true
        out.append(contentsOf: HTTP2Wire.preface)
        Self.appendFrameHeader(length: 18, type: HTTP2Wire.FrameType.settings, flags: 0, stream: 0, to: &out)
        Self.appendSetting(HTTP2Wire.Setting.enablePush, 0, to: &out)
        Self.appendSetting(HTTP2Wire.Setting.initialWindowSize, UInt32(streamWindow), to: &out)
        Self.appendSetting(HTTP2Wire.Setting.maxHeaderListSize, UInt32(Self.maxHeaderBytes), to: &out)
        if connectionWindow > HTTP2Wire.defaultWindow {
            Self.appendWindowUpdate(stream: 0, increment: connectionWindow - HTTP2Wire.defaultWindow, to: &out)
        }
    }

    /// Opens the next client stream (1, 3, 5, …) and returns its id. Appends its HEADERS
    /// (END_HEADERS, and END_STREAM when there is no body; CONTINUATION frames after it when the
    /// block is over the server's SETTINGS_MAX_FRAME_SIZE), then as much of the body as the
    /// server's windows let go, in DATA frames no larger than its MAX_FRAME_SIZE, the last with
    /// END_STREAM. The rest goes out from `receive`, as the server opens its windows.
    ///
    /// The request's block uses no dynamic table; it is led by the HPACK dynamic table size
    /// updates owed (with no table, the connection's first block says 0, and a server that lowers
    /// SETTINGS_HEADER_TABLE_SIZE then needs no further update from us; RFC 7541 §4.2).
    ///
    /// - Precondition: `start(into:)` was called and `canOpen` is true.
    public mutating func open(_ request: HTTP2Request, into out: inout [UInt8]) -> UInt32 {
        scratch.removeAll(keepingCapacity: true)
        encoder.beginBlock(into: &scratch)
        if scratch.isEmpty {
            return open(block: request.headerBlock, body: request.body, into: &out)
        }
        scratch.append(contentsOf: request.headerBlock)
        return open(block: scratch, body: request.body, into: &out)
    }

    /// Opens the next client stream for a request given by its fields, as `open(_:into:)` does,
    /// its header block encoded here: `:method`, `:scheme`, `:authority` (indexed: the same on
    /// every stream), `:path` (never indexed), `headers` as each asks, then `content-length` when
    /// there is a body (indexed: requests of one kind mostly share their length). `body` nil or
    /// empty: the HEADERS frame ends the stream.
    ///
    /// - Precondition: `start(into:)` was called and `canOpen` is true.
    public mutating func open(method: String, scheme: String, authority: String, path: String, headers: [HTTP2HeaderField],
                              body: [UInt8]?, into out: inout [UInt8]) -> UInt32 {
        let body = body?.isEmpty == false ? body : nil
        scratch.removeAll(keepingCapacity: true)
        encoder.beginBlock(into: &scratch)
        encoder.append(":method", method, indexed: true, into: &scratch)
        encoder.append(":scheme", scheme, indexed: true, into: &scratch)
        encoder.append(":authority", authority, indexed: true, into: &scratch)
        encoder.append(":path", path, indexed: false, into: &scratch)
        for field in headers { encoder.append(field.name, field.value, indexed: field.indexed, into: &scratch) }
        if let body { encoder.append("content-length", String(body.count), indexed: true, into: &scratch) }
        return open(block: scratch, body: body, into: &out)
    }

    /// Opens the next stream with a header block ready to send.
    private mutating func open(block: [UInt8], body: [UInt8]?, into out: inout [UInt8]) -> UInt32 {
        precondition(started, "HTTP2ClientSession.open before start(into:)")
        precondition(canOpen, "HTTP2ClientSession.open while canOpen is false")
        let id = nextStreamID
        nextStreamID += 2
        lastOpenedID = id
        appendHeaders(block, stream: id, endStream: body == nil, to: &out)
        streams.append(StreamState(id: id, sendWindow: peerInitialWindow, body: body))
        if body != nil {
            streamsWithPendingData += 1
            sendData(at: streams.count - 1, to: &out)
        }
        return id
    }

    /// Gives up on an open stream: appends RST_STREAM with `code` and forgets it (no event).
    /// Returns false when the stream is not open (it ended, or was never opened).
    @discardableResult
    public mutating func cancel(stream: UInt32, code: UInt32 = HTTP2Wire.ErrorCode.cancel, into out: inout [UInt8]) -> Bool {
        guard let index = streamIndex(stream) else { return false }
        Self.appendRSTStream(stream: stream, code: code, to: &out)
        removeStream(at: index)
        return true
    }

    /// Appends a GOAWAY naming the last stream the server opened (none: 0) and `code`: what to
    /// send before closing on a connection error.
    public static func appendGoAway(code: UInt32, to out: inout [UInt8]) {
        appendFrameHeader(length: 8, type: HTTP2Wire.FrameType.goAway, flags: 0, stream: 0, to: &out)
        appendUInt32(0, to: &out)
        appendUInt32(code, to: &out)
    }

    /// Reads bytes from the connection, in any split (a partial frame is kept for the next call;
    /// DATA payloads are skipped as they arrive, never kept). Appends to `out` what must be
    /// written in answer (SETTINGS and PING acknowledgements, WINDOW_UPDATEs replenishing our
    /// receive windows, RST_STREAMs, DATA the server's windows now let go), and calls `event` for
    /// each stream that ended or was reset.
    ///
    /// Throws on a connection error: a first frame that is not SETTINGS (not an HTTP/2 server),
    /// a frame over 16 KiB, a header block over 64 KiB or that does not decode, CONTINUATION out of
    /// place, a frame on a stream we never opened, PUSH_PROMISE, flow control broken, malformed
    /// SETTINGS, PING, GOAWAY, RST_STREAM or WINDOW_UPDATE. The caller then drops the connection;
    /// the session must not be used again.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        let headerSize = HTTP2Wire.frameHeaderSize
        let count = bytes.count
        var index = 0
        while index < count {
            if dataRemaining > 0 {
                // Inside a DATA payload: the pad length first, if any; the data is kept or skipped.
                if dataPadLengthUnread {
                    dataPadLengthUnread = false
                    guard Int(bytes[index]) < dataLength else {
                        throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "DATA padding longer than its frame")
                    }
                    dataContentRemaining = dataLength - 1 - Int(bytes[index])
                    index += 1
                    dataRemaining -= 1
                    if dataRemaining == 0 { try dataEnded(into: &out, event: event) }
                    continue
                }
                let take = min(dataRemaining, count - index)
                if responseBodyLimit != nil, dataContentRemaining > 0 {
                    let content = min(take, dataContentRemaining)
                    keepData(UnsafeRawBufferPointer(rebasing: bytes[index..<(index + content)]))
                    dataContentRemaining -= content
                }
                index += take
                dataRemaining -= take
                if dataRemaining == 0 { try dataEnded(into: &out, event: event) }
            } else if input.isEmpty {
                // At a frame's start: read it in place when it is all here.
                guard count - index >= headerSize else {
                    input.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index...]))
                    return
                }
                let header = FrameHeader(bytes, at: index)
                try check(header)
                if header.type == HTTP2Wire.FrameType.data {
                    index += headerSize
                    try beginData(header, into: &out, event: event)
                    continue
                }
                let end = index + headerSize + header.length
                guard end <= count else {
                    input.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index...]))
                    return
                }
                try frame(header, payload: UnsafeRawBufferPointer(rebasing: bytes[(index + headerSize)..<end]), into: &out, event: event)
                index = end
            } else {
                // A frame begun in an earlier read: complete its header, then its payload.
                if input.count < headerSize {
                    let take = min(headerSize - input.count, count - index)
                    input.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                    index += take
                    guard input.count == headerSize else { return }
                    let header = input.withUnsafeBytes { FrameHeader($0, at: 0) }
                    try check(header)
                    if header.type == HTTP2Wire.FrameType.data {
                        input.removeAll(keepingCapacity: true)
                        try beginData(header, into: &out, event: event)
                        continue
                    }
                }
                let header = input.withUnsafeBytes { FrameHeader($0, at: 0) }
                let frameSize = headerSize + header.length
                let take = min(frameSize - input.count, count - index)
                input.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                index += take
                guard input.count == frameSize else { return }
                try bufferedFrame(header, into: &out, event: event)
            }
        }
    }

    // MARK: Streams

    /// Whether `stream` is one we never opened: 0, even (the server's, and push is off) or above
    /// the last we opened.
    func isIdle(_ stream: UInt32) -> Bool {
        stream & 1 == 0 || stream > lastOpenedID
    }

    /// Where the open stream `id` is in `streams`, if it is open.
    func streamIndex(_ id: UInt32) -> Int? {
        for index in streams.indices where streams[index].id == id { return index }
        return nil
    }

    /// Forgets an open stream, and its body if not all sent.
    mutating func removeStream(at index: Int) {
        if streams[index].body != nil { streamsWithPendingData -= 1 }
        streams.remove(at: index)
    }

    /// The response ended. If our request's body is not all sent, the server answered without it:
    /// the stream is reset (CANCEL) rather than left half-open with a body nobody reads.
    mutating func responseEnded(at index: Int, into out: inout [UInt8], event: (HTTP2Event) -> Void) {
        let id = streams[index].id
        let status = streams[index].status
        if streams[index].body != nil { Self.appendRSTStream(stream: id, code: HTTP2Wire.ErrorCode.cancel, to: &out) }
        if responseBodyLimit != nil {
            let answer = HTTP2Response(stream: id, status: status, headers: streams[index].responseHeaders,
                                       body: streams[index].responseBody)
            removeStream(at: index)
            event(.answer(answer))
        } else {
            removeStream(at: index)
            event(.response(stream: id, status: status))
        }
    }

    /// Keeps a piece of the current DATA frame's data for its stream's response, up to the limit;
    /// past it the stream is marked, and reset when the frame ends (`dataEnded`).
    mutating func keepData(_ bytes: UnsafeRawBufferPointer) {
        guard let limit = responseBodyLimit, let index = streamIndex(dataStream), streams[index].status != 0,
              !streams[index].tooLarge else { return }
        guard streams[index].responseBody.count + bytes.count <= limit else {
            streams[index].tooLarge = true
            streams[index].responseBody = []
            return
        }
        streams[index].responseBody.append(contentsOf: bytes)
    }

    /// A stream error: resets the stream with `code` and reports it.
    mutating func resetStream(at index: Int, code: UInt32, into out: inout [UInt8], event: (HTTP2Event) -> Void) {
        let id = streams[index].id
        Self.appendRSTStream(stream: id, code: code, to: &out)
        removeStream(at: index)
        event(.reset(stream: id, code: code))
    }

    // MARK: Frames sent

    /// Sends as much of the stream's body as the windows allow, in frames of at most the server's
    /// MAX_FRAME_SIZE; the last carries END_STREAM.
    mutating func sendData(at index: Int, to out: inout [UInt8]) {
        guard let body = streams[index].body else { return }
        let id = streams[index].id
        var offset = streams[index].bodyOffset
        var window = streams[index].sendWindow
        while true {
            let remaining = body.count - offset
            let length = min(remaining, peerMaxFrameSize, window, connectionSendWindow)
            guard length > 0 else { break }
            let last = length == remaining
            Self.appendFrameHeader(length: length, type: HTTP2Wire.FrameType.data, flags: last ? HTTP2Wire.Flag.endStream : 0, stream: id, to: &out)
            out.append(contentsOf: body[offset..<(offset + length)])
            offset += length
            window -= length
            connectionSendWindow -= length
            if last {
                streams[index].body = nil
                streamsWithPendingData -= 1
                break
            }
        }
        streams[index].bodyOffset = offset
        streams[index].sendWindow = window
    }

    /// Sends what the windows allow of every body not all sent, oldest stream first.
    mutating func flushPendingData(to out: inout [UInt8]) {
        var index = 0
        while streamsWithPendingData > 0, connectionSendWindow > 0, index < streams.count {
            sendData(at: index, to: &out)
            index += 1
        }
    }

    /// Appends a header block as HEADERS, then CONTINUATION frames when it is over the server's
    /// MAX_FRAME_SIZE; END_HEADERS on the last.
    func appendHeaders(_ block: [UInt8], stream: UInt32, endStream: Bool, to out: inout [UInt8]) {
        var type = HTTP2Wire.FrameType.headers
        var flags = endStream ? HTTP2Wire.Flag.endStream : 0
        var offset = 0
        repeat {
            let length = min(peerMaxFrameSize, block.count - offset)
            let last = offset + length == block.count
            Self.appendFrameHeader(length: length, type: type, flags: flags | (last ? HTTP2Wire.Flag.endHeaders : 0), stream: stream, to: &out)
            out.append(contentsOf: block[offset..<(offset + length)])
            offset += length
            type = HTTP2Wire.FrameType.continuation
            flags = 0
        } while offset < block.count
    }

    /// Appends a frame header: length (24 bits), type, flags, stream id.
    static func appendFrameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: length >> 16))
        out.append(UInt8(truncatingIfNeeded: length >> 8))
        out.append(UInt8(truncatingIfNeeded: length))
        out.append(type)
        out.append(flags)
        appendUInt32(stream, to: &out)
    }

    /// Appends one setting of a SETTINGS payload.
    static func appendSetting(_ identifier: UInt16, _ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: identifier >> 8))
        out.append(UInt8(truncatingIfNeeded: identifier))
        appendUInt32(value, to: &out)
    }

    /// Appends a WINDOW_UPDATE frame (stream 0: the connection's window).
    static func appendWindowUpdate(stream: UInt32, increment: Int, to out: inout [UInt8]) {
        appendFrameHeader(length: 4, type: HTTP2Wire.FrameType.windowUpdate, flags: 0, stream: stream, to: &out)
        appendUInt32(UInt32(increment), to: &out)
    }

    /// Appends an RST_STREAM frame.
    static func appendRSTStream(stream: UInt32, code: UInt32, to out: inout [UInt8]) {
        appendFrameHeader(length: 4, type: HTTP2Wire.FrameType.rstStream, flags: 0, stream: stream, to: &out)
        appendUInt32(code, to: &out)
    }

    /// Appends `value`, big-endian.
    static func appendUInt32(_ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: value >> 24))
        out.append(UInt8(truncatingIfNeeded: value >> 16))
        out.append(UInt8(truncatingIfNeeded: value >> 8))
        out.append(UInt8(truncatingIfNeeded: value))
    }

    /// The big-endian 32-bit number at `offset` in `bytes`.
    static func uint32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

/// A frame header as read.
struct FrameHeader {
    let length: Int
    let type: UInt8
    let flags: UInt8
    /// The stream id, its reserved bit cleared.
    let stream: UInt32

    /// Reads the nine bytes at `offset` in `bytes`.
    init(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        length = Int(bytes[offset]) << 16 | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2])
        type = bytes[offset + 3]
        flags = bytes[offset + 4]
        stream = (UInt32(bytes[offset + 5]) << 24 | UInt32(bytes[offset + 6]) << 16 | UInt32(bytes[offset + 7]) << 8 | UInt32(bytes[offset + 8])) & 0x7FFF_FFFF
    }
}

/// An open stream: opened by us, its response not yet ended.
struct StreamState: Sendable {
    let id: UInt32
    /// What the server lets us send on it; negative when the server lowered INITIAL_WINDOW_SIZE.
    var sendWindow: Int
    /// The body still to send, from `bodyOffset`; nil once END_STREAM is sent.
    var body: [UInt8]?
    var bodyOffset = 0
    /// Flow-controlled bytes received on it since its last WINDOW_UPDATE.
    var received = 0
    /// The final (non-1xx) response's status; 0 until its HEADERS arrive.
    var status = 0
    /// The final response's fields and body so far, when responses are kept.
    var responseHeaders = HPACKHeaders()
    var responseBody: [UInt8] = []
    /// The response's body went past the session's limit.
    var tooLarge = false

    init(id: UInt32, sendWindow: Int, body: [UInt8]?) {
        self.id = id
        self.sendWindow = sendWindow
        self.body = body
    }
}
