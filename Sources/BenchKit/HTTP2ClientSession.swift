import NIOCore
import NIOHPACK

/// HTTP/2 numbers from RFC 9113: the client preface, frame types, flags, settings and error codes.
enum HTTP2Wire {
    /// What a client sends first on a connection, before its SETTINGS (RFC 9113 §3.4).
    static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Bytes in a frame header: length (24 bits), type, flags, stream id (31 bits).
    static let frameHeaderSize = 9
    /// The largest frame payload we accept: the default SETTINGS_MAX_FRAME_SIZE, which we never raise.
    static let maxFrameSize = 16_384
    /// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
    static let maxAllowedFrameSize = (1 << 24) - 1
    /// The largest a flow-control window may grow to (2^31 - 1).
    static let maxWindow = (1 << 31) - 1
    /// The window every stream and the connection start with.
    static let defaultWindow = 65_535
    /// The largest stream id (2^31 - 1).
    static let maxStreamID: UInt32 = 0x7FFF_FFFF

    /// Frame types (RFC 9113 §6).
    enum FrameType {
        static let data: UInt8 = 0x0
        static let headers: UInt8 = 0x1
        static let priority: UInt8 = 0x2
        static let rstStream: UInt8 = 0x3
        static let settings: UInt8 = 0x4
        static let pushPromise: UInt8 = 0x5
        static let ping: UInt8 = 0x6
        static let goAway: UInt8 = 0x7
        static let windowUpdate: UInt8 = 0x8
        static let continuation: UInt8 = 0x9
    }

    /// Frame flags; which apply depends on the frame type.
    enum Flag {
        /// DATA, HEADERS: the sender's last frame on the stream.
        static let endStream: UInt8 = 0x1
        /// SETTINGS, PING: an acknowledgement.
        static let ack: UInt8 = 0x1
        /// HEADERS, CONTINUATION: the header block ends in this frame.
        static let endHeaders: UInt8 = 0x4
        /// DATA, HEADERS: a pad length byte leads the payload and padding ends it.
        static let padded: UInt8 = 0x8
        /// HEADERS: five bytes of priority follow the pad length.
        static let priority: UInt8 = 0x20
    }

    /// SETTINGS identifiers (RFC 9113 §6.5.2).
    enum Setting {
        static let headerTableSize: UInt16 = 0x1
        static let enablePush: UInt16 = 0x2
        static let maxConcurrentStreams: UInt16 = 0x3
        static let initialWindowSize: UInt16 = 0x4
        static let maxFrameSize: UInt16 = 0x5
        static let maxHeaderListSize: UInt16 = 0x6
    }

    /// Error codes carried by RST_STREAM and GOAWAY (RFC 9113 §7).
    enum ErrorCode {
        static let noError: UInt32 = 0x0
        static let protocolError: UInt32 = 0x1
        static let internalError: UInt32 = 0x2
        static let flowControlError: UInt32 = 0x3
        static let settingsTimeout: UInt32 = 0x4
        static let streamClosed: UInt32 = 0x5
        static let frameSizeError: UInt32 = 0x6
        static let refusedStream: UInt32 = 0x7
        static let cancel: UInt32 = 0x8
        static let compressionError: UInt32 = 0x9

        /// The code's name in RFC 9113, or its number when it has none.
        static func name(_ code: UInt32) -> String {
            switch code {
            case 0x0: "NO_ERROR"
            case 0x1: "PROTOCOL_ERROR"
            case 0x2: "INTERNAL_ERROR"
            case 0x3: "FLOW_CONTROL_ERROR"
            case 0x4: "SETTINGS_TIMEOUT"
            case 0x5: "STREAM_CLOSED"
            case 0x6: "FRAME_SIZE_ERROR"
            case 0x7: "REFUSED_STREAM"
            case 0x8: "CANCEL"
            case 0x9: "COMPRESSION_ERROR"
            case 0xA: "CONNECT_ERROR"
            case 0xB: "ENHANCE_YOUR_CALM"
            case 0xC: "INADEQUATE_SECURITY"
            case 0xD: "HTTP_1_1_REQUIRED"
            default: "error code \(code)"
            }
        }
    }
}

/// A request ready for HTTP/2: its HPACK header block, encoded once and sent as is on every
/// stream, and its body.
///
/// The block uses no dynamic table and no Huffman coding, so that it means the same on every
/// stream of every connection: fields that are whole entries of the static table are indexed
/// (`:method GET`, `:scheme https`, `:path /`…), the others are literals without indexing, with an
/// indexed name when the static table has the name.
struct HTTP2Request: Sendable {
    /// The HPACK header block: pseudo-headers, then the headers, then `content-length` when there
    /// is a body.
    let headerBlock: [UInt8]
    /// The body, sent in DATA frames; nil when there is none (or it is empty), and the HEADERS
    /// frame then ends the stream.
    let body: [UInt8]?

    /// Encodes the request. Header names are lowercased; the connection-specific headers HTTP/2
    /// forbids (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`,
    /// and `te` unless it is `trailers`) are dropped, as is `content-length` (the body's length is
    /// sent instead when there is a body, even an empty one). `host` is dropped too: it names
    /// the `:authority` when `authority` is empty.
    init(method: String, scheme: String, authority: String, path: String, headers: [(String, String)] = [], body: [UInt8]? = nil) {
        var authority = authority
        var fields: [(String, String)] = []
        fields.reserveCapacity(headers.count + 1)
        for (rawName, value) in headers {
            let name = rawName.lowercased()
            switch name {
            case "host":
                if authority.isEmpty { authority = value }
            case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "content-length":
                continue
            case "te":
                if value.lowercased() == "trailers" { fields.append((name, "trailers")) }
            default:
                fields.append((name, value))
            }
        }
        if let body { fields.append(("content-length", String(body.count))) }

        var block: [UInt8] = []
        block.reserveCapacity(256)
        Self.appendField(":method", method, to: &block)
        Self.appendField(":scheme", scheme, to: &block)
        if !authority.isEmpty { Self.appendField(":authority", authority, to: &block) }
        Self.appendField(":path", path, to: &block)
        for (name, value) in fields { Self.appendField(name, value, to: &block) }
        headerBlock = block
        self.body = body?.isEmpty == false ? body : nil
    }

    /// The names of the HPACK static table (RFC 7541 Appendix A), by index; index 0 is unused.
    private static let staticTableNames: [String] = [
        "", ":authority", ":method", ":method", ":path", ":path", ":scheme", ":scheme",
        ":status", ":status", ":status", ":status", ":status", ":status", ":status",
        "accept-charset", "accept-encoding", "accept-language", "accept-ranges", "accept",
        "access-control-allow-origin", "age", "allow", "authorization", "cache-control",
        "content-disposition", "content-encoding", "content-language", "content-length",
        "content-location", "content-range", "content-type", "cookie", "date", "etag", "expect",
        "expires", "from", "host", "if-match", "if-modified-since", "if-none-match", "if-range",
        "if-unmodified-since", "last-modified", "link", "location", "max-forwards",
        "proxy-authenticate", "proxy-authorization", "range", "referer", "refresh", "retry-after",
        "server", "set-cookie", "strict-transport-security", "transfer-encoding", "user-agent",
        "vary", "via", "www-authenticate",
    ]

    /// The index of the static table entry that is exactly `name: value`, if one is.
    private static func staticIndex(name: String, value: String) -> Int? {
        switch (name, value) {
        case (":method", "GET"): 2
        case (":method", "POST"): 3
        case (":path", "/"): 4
        case (":path", "/index.html"): 5
        case (":scheme", "http"): 6
        case (":scheme", "https"): 7
        case ("accept-encoding", "gzip, deflate"): 16
        default: nil
        }
    }

    /// Appends one field: indexed when the static table has it whole, else a literal without
    /// indexing (RFC 7541 §6.2.2), its name indexed when the static table has the name.
    private static func appendField(_ name: String, _ value: String, to block: inout [UInt8]) {
        if let index = staticIndex(name: name, value: value) {
            appendInteger(index, prefixBits: 7, pattern: 0x80, to: &block)
            return
        }
        if let index = staticTableNames.firstIndex(of: name), index > 0 {
            appendInteger(index, prefixBits: 4, pattern: 0x00, to: &block)
        } else {
            block.append(0x00)
            appendString(name, to: &block)
        }
        appendString(value, to: &block)
    }

    /// Appends a string literal, not Huffman-coded: its length (7-bit prefix, H = 0), then its bytes.
    private static func appendString(_ string: String, to block: inout [UInt8]) {
        appendInteger(string.utf8.count, prefixBits: 7, pattern: 0x00, to: &block)
        block.append(contentsOf: string.utf8)
    }

    /// Appends an HPACK integer (RFC 7541 §5.1) with an `prefixBits`-bit prefix, the first byte's
    /// upper bits set from `pattern`.
    private static func appendInteger(_ value: Int, prefixBits: Int, pattern: UInt8, to block: inout [UInt8]) {
        let limit = (1 << prefixBits) - 1
        if value < limit {
            block.append(pattern | UInt8(value))
            return
        }
        block.append(pattern | UInt8(limit))
        var rest = value - limit
        while rest >= 0x80 {
            block.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        block.append(UInt8(rest))
    }
}

/// What happened to a stream, reported by `HTTP2ClientSession.receive`. Every stream opened is
/// reported exactly once, unless the connection fails first.
enum HTTP2Event: Equatable, Sendable {
    /// The stream's response ended (END_STREAM seen); `status` is that of its final (non-1xx)
    /// HEADERS.
    case response(stream: UInt32, status: Int)
    /// The stream ended without a response: the peer reset it (RST_STREAM, with the peer's code),
    /// it was above a GOAWAY's last-stream-id (REFUSED_STREAM: the server did not process it), or
    /// its response was malformed and we reset it (RST_STREAM sent, with our code).
    case reset(stream: UInt32, code: UInt32)
}

/// A connection error: the peer broke HTTP/2 (or HPACK) and the connection cannot go on.
struct HTTP2ProtocolError: Error, CustomStringConvertible {
    /// The RFC 9113 error code a GOAWAY would carry.
    let code: UInt32
    /// The code's name and what was wrong, in words.
    let description: String

    /// An error with `code`, described in `words`.
    init(_ code: UInt32, _ words: String) {
        self.code = code
        description = "\(HTTP2Wire.ErrorCode.name(code)): \(words)"
    }
}

/// The client side of one HTTP/2 connection, without I/O: what to write to open streams, and what
/// the server's bytes mean. The caller writes the bytes that `start`, `open` and `receive` append
/// to `out`, in order, and feeds `receive` whatever it reads.
///
/// Made for a load generator: many streams, one request shape, responses only counted (bodies are
/// skipped as they arrive, never buffered). Our receive windows are large (h2load's 2^30 - 1 by
/// default) and are replenished once half of them is consumed; sending respects the server's
/// windows and frame size, and keeps what does not fit until a WINDOW_UPDATE (or SETTINGS) lets it
/// go. Server push is disabled. Hostile input is bounded: frames at most 16 KiB (our
/// SETTINGS_MAX_FRAME_SIZE), header blocks at most 64 KiB, encoded or decoded.
struct HTTP2ClientSession: Sendable {
    /// Our default receive window, for each stream and for the connection: h2load's 2^30 - 1.
    static let defaultWindow = (1 << 30) - 1
    /// The largest header block we take, encoded (HEADERS and CONTINUATION fragments) or decoded
    /// (RFC 9113 header list size, which we announce as SETTINGS_MAX_HEADER_LIST_SIZE).
    static let maxHeaderBytes = 64 * 1024

    // Our side.
    /// Our SETTINGS_INITIAL_WINDOW_SIZE: each stream's receive window.
    private let streamWindow: Int
    /// The connection's receive window.
    private let connectionWindow: Int
    private var started = false
    /// Our first header block starts with an HPACK table size update to 0 (see `open`).
    private var sentTableSizeUpdate = false
    private var nextStreamID: UInt32 = 1
    /// The highest stream id opened: higher (or even) ids are idle, lower ones not in `streams` closed.
    private var lastOpenedID: UInt32 = 0
    /// The open streams, in the order they were opened (a connection has few).
    private var streams: [StreamState] = []
    /// Streams whose body is not all sent.
    private var streamsWithPendingData = 0
    /// Flow-controlled bytes received on the connection since our last connection WINDOW_UPDATE.
    private var connectionReceived = 0

    // The server's side.
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS: unlimited until it says.
    private(set) var peerMaxConcurrentStreams = Int.max
    private var peerInitialWindow = HTTP2Wire.defaultWindow
    private var peerMaxFrameSize = HTTP2Wire.maxFrameSize
    /// What the server lets us send on the connection.
    private var connectionSendWindow = HTTP2Wire.defaultWindow
    /// The server's first frame, its SETTINGS, has arrived.
    private var peerSettingsReceived = false
    /// The lowest last-stream-id of the GOAWAYs received.
    private var goAwayLastStreamID: UInt32?
    /// The error code of the last GOAWAY received (NO_ERROR for a graceful shutdown), if any.
    private(set) var goAwayCode: UInt32?

    // Reading.
    /// A frame's start not yet complete: its header, or (not DATA) its header and payload so far.
    private var input: [UInt8] = []
    /// The DATA frame being skipped: its stream, flags, payload length and bytes still to come.
    private var dataStream: UInt32 = 0
    private var dataFlags: UInt8 = 0
    private var dataLength = 0
    private var dataRemaining = 0
    /// The DATA frame is padded and its pad length byte has not arrived yet.
    private var dataPadLengthUnread = false
    /// One HPACK decoder for the connection: every header block goes through it, in order.
    private var decoder: HPACKDecoder
    /// The header block being gathered from HEADERS and CONTINUATION frames.
    private var headerBlock: ByteBuffer
    private var headerBlockStream: UInt32 = 0
    private var headerBlockEndsStream = false
    /// The stream whose CONTINUATION must come next, or 0.
    private var continuationStream: UInt32 = 0

    /// A session with receive windows of `streamWindow` for each stream (announced as
    /// SETTINGS_INITIAL_WINDOW_SIZE) and `connectionWindow` for the connection (at least the
    /// 65,535 it starts with; raised by a WINDOW_UPDATE in `start`).
    init(streamWindow: Int = HTTP2ClientSession.defaultWindow, connectionWindow: Int = HTTP2ClientSession.defaultWindow) {
        precondition((1...HTTP2Wire.maxWindow).contains(streamWindow), "stream window out of range")
        precondition((HTTP2Wire.defaultWindow...HTTP2Wire.maxWindow).contains(connectionWindow), "connection window out of range")
        self.streamWindow = streamWindow
        self.connectionWindow = connectionWindow
        decoder = HPACKDecoder(
            allocator: ByteBufferAllocator(),
            maxDynamicTableSize: HPACKDecoder.maxDynamicTableSize,
            maxHeaderListSize: Self.maxHeaderBytes
        )
        headerBlock = ByteBufferAllocator().buffer(capacity: 256)
        input.reserveCapacity(256)
    }

    /// Streams open now: opened, and neither answered in full nor reset.
    var openStreams: Int { streams.count }

    /// Whether another stream may be opened: fewer open than the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until its SETTINGS arrive, which may come after
    /// our first streams: RFC 9113 allows that), no GOAWAY received, and stream ids left.
    var canOpen: Bool {
        goAwayLastStreamID == nil && nextStreamID <= HTTP2Wire.maxStreamID && streams.count < peerMaxConcurrentStreams
    }

    /// True once no stream will ever open again (after a GOAWAY, or with stream ids exhausted) and
    /// every stream has ended: the connection should be closed and replaced.
    var finished: Bool {
        streams.isEmpty && (goAwayLastStreamID != nil || nextStreamID > HTTP2Wire.maxStreamID)
    }

    /// Appends the client connection preface, our SETTINGS (ENABLE_PUSH 0, INITIAL_WINDOW_SIZE,
    /// MAX_HEADER_LIST_SIZE) and a WINDOW_UPDATE raising the connection's receive window. Once, first.
    mutating func start(into out: inout [UInt8]) {
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
    /// The first header block of the connection is led by an HPACK dynamic table size update to 0:
    /// we never use the table, and a server that lowers SETTINGS_HEADER_TABLE_SIZE then needs no
    /// further update from us (RFC 7541 §4.2).
    ///
    /// - Precondition: `start(into:)` was called and `canOpen` is true.
    mutating func open(_ request: HTTP2Request, into out: inout [UInt8]) -> UInt32 {
        precondition(started, "HTTP2ClientSession.open before start(into:)")
        precondition(canOpen, "HTTP2ClientSession.open while canOpen is false")
        let id = nextStreamID
        nextStreamID += 2
        lastOpenedID = id
        let endStream = request.body == nil
        if sentTableSizeUpdate {
            appendHeaders(request.headerBlock, stream: id, endStream: endStream, to: &out)
        } else {
            sentTableSizeUpdate = true
            appendHeaders([0x20] + request.headerBlock, stream: id, endStream: endStream, to: &out)
        }
        streams.append(StreamState(id: id, sendWindow: peerInitialWindow, body: request.body))
        if request.body != nil {
            streamsWithPendingData += 1
            sendData(at: streams.count - 1, to: &out)
        }
        return id
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
    mutating func receive(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        let headerSize = HTTP2Wire.frameHeaderSize
        let count = bytes.count
        var index = 0
        while index < count {
            if dataRemaining > 0 {
                // Inside a DATA payload: only the pad length, if any, is read.
                if dataPadLengthUnread {
                    dataPadLengthUnread = false
                    guard Int(bytes[index]) < dataLength else {
                        throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "DATA padding longer than its frame")
                    }
                }
                let take = min(dataRemaining, count - index)
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

    // MARK: Frames received

    /// Checks what a frame header alone can tell: the server starts with SETTINGS, frames fit our
    /// maximum size, and a header block's CONTINUATION frames come next, uninterrupted.
    private mutating func check(_ header: FrameHeader) throws(HTTP2ProtocolError) {
        if !peerSettingsReceived {
            guard header.type == HTTP2Wire.FrameType.settings, header.flags & HTTP2Wire.Flag.ack == 0 else {
                // "HTTP/1.1 400 …" read as a frame header: length "HTT", type "P".
                if header.length == 0x48_5454, header.type == 0x50 {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "the server answered in HTTP/1.x, not HTTP/2")
                }
                throw HTTP2ProtocolError(
                    HTTP2Wire.ErrorCode.protocolError,
                    "the server's first frame (type \(header.type)) is not SETTINGS: not an HTTP/2 server?"
                )
            }
            peerSettingsReceived = true
        }
        guard header.length <= HTTP2Wire.maxFrameSize else {
            throw HTTP2ProtocolError(
                HTTP2Wire.ErrorCode.frameSizeError,
                "a frame of \(header.length) bytes (type \(header.type)), over our maximum of \(HTTP2Wire.maxFrameSize)"
            )
        }
        if continuationStream != 0 {
            guard header.type == HTTP2Wire.FrameType.continuation, header.stream == continuationStream else {
                throw HTTP2ProtocolError(
                    HTTP2Wire.ErrorCode.protocolError,
                    "a frame of type \(header.type) on stream \(header.stream) inside stream \(continuationStream)'s header block"
                )
            }
        } else if header.type == HTTP2Wire.FrameType.continuation {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "CONTINUATION on stream \(header.stream) outside a header block")
        }
    }

    /// Handles a whole frame (not DATA) gathered in `input`, and empties `input`.
    private mutating func bufferedFrame(_ header: FrameHeader, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        // `input` is moved out while its bytes are read, so that `self` can change meanwhile.
        var bytes: [UInt8] = []
        swap(&bytes, &input)
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(HTTP2ProtocolError) in
                try self.frame(header, payload: UnsafeRawBufferPointer(rebasing: raw[HTTP2Wire.frameHeaderSize...]), into: &out, event: event)
            }
        }
        bytes.removeAll(keepingCapacity: true)
        swap(&bytes, &input)
        try result.get()
    }

    /// Handles a whole frame other than DATA.
    private mutating func frame(_ header: FrameHeader, payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        switch header.type {
        case HTTP2Wire.FrameType.headers:
            try headers(header, payload, into: &out, event: event)
        case HTTP2Wire.FrameType.continuation:
            try appendHeaderFragment(payload)
            if header.flags & HTTP2Wire.Flag.endHeaders != 0 {
                continuationStream = 0
                try headerBlockEnded(into: &out, event: event)
            }
        case HTTP2Wire.FrameType.settings:
            try settings(header, payload, into: &out)
        case HTTP2Wire.FrameType.ping:
            guard header.stream == 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "PING on stream \(header.stream)") }
            guard header.length == 8 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "PING of \(header.length) bytes") }
            if header.flags & HTTP2Wire.Flag.ack == 0 {
                Self.appendFrameHeader(length: 8, type: HTTP2Wire.FrameType.ping, flags: HTTP2Wire.Flag.ack, stream: 0, to: &out)
                out.append(contentsOf: payload)
            }
        case HTTP2Wire.FrameType.windowUpdate:
            try windowUpdate(header, payload, into: &out, event: event)
        case HTTP2Wire.FrameType.rstStream:
            guard header.length == 4 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "RST_STREAM of \(header.length) bytes") }
            guard !isIdle(header.stream) else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "RST_STREAM on stream \(header.stream), which we never opened")
            }
            if let index = streamIndex(header.stream) {
                removeStream(at: index)
                event(.reset(stream: header.stream, code: Self.uint32(payload, at: 0)))
            }
        case HTTP2Wire.FrameType.goAway:
            try goAway(header, payload, event: event)
        case HTTP2Wire.FrameType.priority:
            guard header.stream != 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "PRIORITY on stream 0") }
        case HTTP2Wire.FrameType.pushPromise:
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "PUSH_PROMISE, with push disabled")
        default:
            // Unknown frame types are ignored (RFC 9113 §4.1).
            break
        }
    }

    /// A DATA frame's header: checks it, and skips its payload from then on.
    private mutating func beginData(_ header: FrameHeader, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        guard !isIdle(header.stream) else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "DATA on stream \(header.stream), which we never opened")
        }
        let padded = header.flags & HTTP2Wire.Flag.padded != 0
        guard !padded || header.length > 0 else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "padded DATA without a pad length")
        }
        dataStream = header.stream
        dataFlags = header.flags
        dataLength = header.length
        dataRemaining = header.length
        dataPadLengthUnread = padded
        if header.length == 0 { try dataEnded(into: &out, event: event) }
    }

    /// A DATA frame's last byte arrived: flow control, and the response's end on END_STREAM.
    private mutating func dataEnded(into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        let length = dataLength
        // Padding counts against the windows too (RFC 9113 §6.1).
        guard length <= connectionWindow - connectionReceived else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "DATA beyond the connection's receive window")
        }
        connectionReceived += length
        if connectionReceived > connectionWindow / 2 {
            Self.appendWindowUpdate(stream: 0, increment: connectionReceived, to: &out)
            connectionReceived = 0
        }
        // A stream closed already (reset, or above a GOAWAY): its DATA was in flight; ignored.
        guard let index = streamIndex(dataStream) else { return }
        guard length <= streamWindow - streams[index].received else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "DATA beyond stream \(dataStream)'s receive window")
        }
        guard streams[index].status != 0 else {
            // DATA before the response's HEADERS: a malformed response.
            resetStream(at: index, code: HTTP2Wire.ErrorCode.protocolError, into: &out, event: event)
            return
        }
        if dataFlags & HTTP2Wire.Flag.endStream != 0 {
            responseEnded(at: index, into: &out, event: event)
            return
        }
        streams[index].received += length
        if streams[index].received > streamWindow / 2 {
            Self.appendWindowUpdate(stream: dataStream, increment: streams[index].received, to: &out)
            streams[index].received = 0
        }
    }

    /// A HEADERS frame: starts a header block (decoded at END_HEADERS, here or in a CONTINUATION).
    private mutating func headers(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        guard !isIdle(header.stream) else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HEADERS on stream \(header.stream), which we never opened")
        }
        var start = 0
        var end = payload.count
        if header.flags & HTTP2Wire.Flag.padded != 0 {
            guard end >= 1, Int(payload[0]) <= end - 1 else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "HEADERS padding longer than its frame")
            }
            end -= Int(payload[0])
            start = 1
        }
        if header.flags & HTTP2Wire.Flag.priority != 0 {
            guard end - start >= 5 else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "HEADERS too short for its priority")
            }
            start += 5
        }
        headerBlock.clear()
        headerBlockStream = header.stream
        headerBlockEndsStream = header.flags & HTTP2Wire.Flag.endStream != 0
        try appendHeaderFragment(UnsafeRawBufferPointer(rebasing: payload[start..<end]))
        if header.flags & HTTP2Wire.Flag.endHeaders != 0 {
            try headerBlockEnded(into: &out, event: event)
        } else {
            continuationStream = header.stream
        }
    }

    /// Adds a HEADERS or CONTINUATION fragment to the header block, within its bound.
    private mutating func appendHeaderFragment(_ fragment: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard headerBlock.readableBytes + fragment.count <= Self.maxHeaderBytes else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "a header block over \(Self.maxHeaderBytes) bytes")
        }
        headerBlock.writeBytes(fragment)
    }

    /// A header block is complete: decodes it (always, even for a closed stream, so that the
    /// decoder's dynamic table stays in step with the server's encoder), then reads `:status`.
    private mutating func headerBlockEnded(into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        let fields: HPACKHeaders
        do {
            fields = try decoder.decodeHeaders(from: &headerBlock)
        } catch {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.compressionError, "stream \(headerBlockStream)'s header block does not decode: \(error)")
        }
        headerBlock.clear()
        guard let index = streamIndex(headerBlockStream) else { return }
        let endStream = headerBlockEndsStream
        if streams[index].status == 0 {
            guard let status = Self.status(in: fields), !(status < 200 && endStream) else {
                // No (valid) :status, or an interim response that ends the stream: malformed.
                resetStream(at: index, code: HTTP2Wire.ErrorCode.protocolError, into: &out, event: event)
                return
            }
            // 1xx responses are interim: the final one follows.
            guard status >= 200 else { return }
            streams[index].status = status
            if endStream { responseEnded(at: index, into: &out, event: event) }
        } else if endStream {
            // Trailers.
            responseEnded(at: index, into: &out, event: event)
        } else {
            // HEADERS after the response's that do not end the stream: malformed.
            resetStream(at: index, code: HTTP2Wire.ErrorCode.protocolError, into: &out, event: event)
        }
    }

    /// The three-digit `:status` of a response's header block, if it has one.
    private static func status(in fields: HPACKHeaders) -> Int? {
        guard let value = fields.first(name: ":status"), value.utf8.count == 3,
              value.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let status = Int(value), status >= 100
        else { return nil }
        return status
    }

    /// SETTINGS: applies the server's, acknowledges them, and sends what a larger window lets go.
    private mutating func settings(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(HTTP2ProtocolError) {
        guard header.stream == 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "SETTINGS on stream \(header.stream)") }
        if header.flags & HTTP2Wire.Flag.ack != 0 {
            guard header.length == 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "SETTINGS ACK with a payload") }
            return
        }
        guard header.length % 6 == 0 else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "SETTINGS of \(header.length) bytes, not a multiple of 6")
        }
        var offset = 0
        while offset < payload.count {
            let identifier = UInt16(payload[offset]) << 8 | UInt16(payload[offset + 1])
            let value = Self.uint32(payload, at: offset + 2)
            offset += 6
            switch identifier {
            case HTTP2Wire.Setting.enablePush:
                guard value == 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "a server's SETTINGS_ENABLE_PUSH of \(value)") }
            case HTTP2Wire.Setting.maxConcurrentStreams:
                peerMaxConcurrentStreams = Int(value)
            case HTTP2Wire.Setting.initialWindowSize:
                guard Int(value) <= HTTP2Wire.maxWindow else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE of \(value)")
                }
                // The change applies to every open stream's window (RFC 9113 §6.9.2).
                let delta = Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
                for index in streams.indices {
                    streams[index].sendWindow += delta
                    guard streams[index].sendWindow <= HTTP2Wire.maxWindow else {
                        throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE overflows stream \(streams[index].id)'s window")
                    }
                }
            case HTTP2Wire.Setting.maxFrameSize:
                guard (HTTP2Wire.maxFrameSize...HTTP2Wire.maxAllowedFrameSize).contains(Int(value)) else {
                    throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "SETTINGS_MAX_FRAME_SIZE of \(value)")
                }
                peerMaxFrameSize = Int(value)
            default:
                // HEADER_TABLE_SIZE: our encoder uses no dynamic table (see `open`).
                // MAX_HEADER_LIST_SIZE: advisory. Unknown settings are ignored.
                break
            }
        }
        Self.appendFrameHeader(length: 0, type: HTTP2Wire.FrameType.settings, flags: HTTP2Wire.Flag.ack, stream: 0, to: &out)
        flushPendingData(to: &out)
    }

    /// WINDOW_UPDATE: widens the connection's or a stream's send window, and sends what it lets go.
    private mutating func windowUpdate(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        guard header.length == 4 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "WINDOW_UPDATE of \(header.length) bytes") }
        let increment = Int(Self.uint32(payload, at: 0) & 0x7FFF_FFFF)
        if header.stream == 0 {
            guard increment > 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "connection WINDOW_UPDATE of 0") }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maxWindow else {
                throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.flowControlError, "connection WINDOW_UPDATE past 2^31 - 1")
            }
            flushPendingData(to: &out)
            return
        }
        guard !isIdle(header.stream) else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "WINDOW_UPDATE on stream \(header.stream), which we never opened")
        }
        guard let index = streamIndex(header.stream) else { return }
        guard increment > 0 else {
            resetStream(at: index, code: HTTP2Wire.ErrorCode.protocolError, into: &out, event: event)
            return
        }
        streams[index].sendWindow += increment
        guard streams[index].sendWindow <= HTTP2Wire.maxWindow else {
            resetStream(at: index, code: HTTP2Wire.ErrorCode.flowControlError, into: &out, event: event)
            return
        }
        sendData(at: index, to: &out)
    }

    /// GOAWAY: no new streams; ours above its last-stream-id were not processed and end now.
    private mutating func goAway(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
        guard header.stream == 0 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "GOAWAY on stream \(header.stream)") }
        guard header.length >= 8 else { throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.frameSizeError, "GOAWAY of \(header.length) bytes") }
        let lastStreamID = min(Self.uint32(payload, at: 0) & 0x7FFF_FFFF, goAwayLastStreamID ?? .max)
        goAwayLastStreamID = lastStreamID
        goAwayCode = Self.uint32(payload, at: 4)
        var index = 0
        while index < streams.count {
            let id = streams[index].id
            if id > lastStreamID {
                removeStream(at: index)
                event(.reset(stream: id, code: HTTP2Wire.ErrorCode.refusedStream))
            } else {
                index += 1
            }
        }
    }

    // MARK: Streams

    /// Whether `stream` is one we never opened: 0, even (the server's, and push is off) or above
    /// the last we opened.
    private func isIdle(_ stream: UInt32) -> Bool {
        stream & 1 == 0 || stream > lastOpenedID
    }

    /// Where the open stream `id` is in `streams`, if it is open.
    private func streamIndex(_ id: UInt32) -> Int? {
        for index in streams.indices where streams[index].id == id { return index }
        return nil
    }

    /// Forgets an open stream, and its body if not all sent.
    private mutating func removeStream(at index: Int) {
        if streams[index].body != nil { streamsWithPendingData -= 1 }
        streams.remove(at: index)
    }

    /// The response ended. If our request's body is not all sent, the server answered without it:
    /// the stream is reset (CANCEL) rather than left half-open with a body nobody reads.
    private mutating func responseEnded(at index: Int, into out: inout [UInt8], event: (HTTP2Event) -> Void) {
        let id = streams[index].id
        let status = streams[index].status
        if streams[index].body != nil { Self.appendRSTStream(stream: id, code: HTTP2Wire.ErrorCode.cancel, to: &out) }
        removeStream(at: index)
        event(.response(stream: id, status: status))
    }

    /// A stream error: resets the stream with `code` and reports it.
    private mutating func resetStream(at index: Int, code: UInt32, into out: inout [UInt8], event: (HTTP2Event) -> Void) {
        let id = streams[index].id
        Self.appendRSTStream(stream: id, code: code, to: &out)
        removeStream(at: index)
        event(.reset(stream: id, code: code))
    }

    // MARK: Frames sent

    /// Sends as much of the stream's body as the windows allow, in frames of at most the server's
    /// MAX_FRAME_SIZE; the last carries END_STREAM.
    private mutating func sendData(at index: Int, to out: inout [UInt8]) {
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
    private mutating func flushPendingData(to out: inout [UInt8]) {
        var index = 0
        while streamsWithPendingData > 0, connectionSendWindow > 0, index < streams.count {
            sendData(at: index, to: &out)
            index += 1
        }
    }

    /// Appends a header block as HEADERS, then CONTINUATION frames when it is over the server's
    /// MAX_FRAME_SIZE; END_HEADERS on the last.
    private func appendHeaders(_ block: [UInt8], stream: UInt32, endStream: Bool, to out: inout [UInt8]) {
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
    private static func appendFrameHeader(length: Int, type: UInt8, flags: UInt8, stream: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: length >> 16))
        out.append(UInt8(truncatingIfNeeded: length >> 8))
        out.append(UInt8(truncatingIfNeeded: length))
        out.append(type)
        out.append(flags)
        appendUInt32(stream, to: &out)
    }

    /// Appends one setting of a SETTINGS payload.
    private static func appendSetting(_ identifier: UInt16, _ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: identifier >> 8))
        out.append(UInt8(truncatingIfNeeded: identifier))
        appendUInt32(value, to: &out)
    }

    /// Appends a WINDOW_UPDATE frame (stream 0: the connection's window).
    private static func appendWindowUpdate(stream: UInt32, increment: Int, to out: inout [UInt8]) {
        appendFrameHeader(length: 4, type: HTTP2Wire.FrameType.windowUpdate, flags: 0, stream: stream, to: &out)
        appendUInt32(UInt32(increment), to: &out)
    }

    /// Appends an RST_STREAM frame.
    private static func appendRSTStream(stream: UInt32, code: UInt32, to out: inout [UInt8]) {
        appendFrameHeader(length: 4, type: HTTP2Wire.FrameType.rstStream, flags: 0, stream: stream, to: &out)
        appendUInt32(code, to: &out)
    }

    /// Appends `value`, big-endian.
    private static func appendUInt32(_ value: UInt32, to out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: value >> 24))
        out.append(UInt8(truncatingIfNeeded: value >> 16))
        out.append(UInt8(truncatingIfNeeded: value >> 8))
        out.append(UInt8(truncatingIfNeeded: value))
    }

    /// The big-endian 32-bit number at `offset` in `bytes`.
    private static func uint32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}

/// A frame header as read.
private struct FrameHeader {
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
private struct StreamState: Sendable {
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

    init(id: UInt32, sendWindow: Int, body: [UInt8]?) {
        self.id = id
        self.sendWindow = sendWindow
        self.body = body
    }
}
