import NIOCore
import NIOHPACK

/// What the server's frames mean (`HTTP2ClientSession.receive`).
extension HTTP2ClientSession {
    // MARK: Frames received

    /// Checks what a frame header alone can tell: the server starts with SETTINGS, frames fit our
    /// maximum size, and a header block's CONTINUATION frames come next, uninterrupted.
    mutating func check(_ header: FrameHeader) throws(HTTP2ProtocolError) {
        if !firstFrameChecked {
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
            firstFrameChecked = true
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
    mutating func bufferedFrame(_ header: FrameHeader, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
    mutating func frame(_ header: FrameHeader, payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
    mutating func beginData(_ header: FrameHeader, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
        dataContentRemaining = padded ? 0 : header.length
        dataPadLengthUnread = padded
        if header.length == 0 { try dataEnded(into: &out, event: event) }
    }

    /// A DATA frame's last byte arrived: flow control, and the response's end on END_STREAM.
    mutating func dataEnded(into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
        if streams[index].tooLarge {
            let id = streams[index].id
            Self.appendRSTStream(stream: id, code: HTTP2Wire.ErrorCode.cancel, to: &out)
            removeStream(at: index)
            event(.tooLarge(stream: id))
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
    mutating func headers(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
    mutating func appendHeaderFragment(_ fragment: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard headerBlock.readableBytes + fragment.count <= Self.maxHeaderBytes else {
            throw HTTP2ProtocolError(HTTP2Wire.ErrorCode.protocolError, "a header block over \(Self.maxHeaderBytes) bytes")
        }
        headerBlock.writeBytes(fragment)
    }

    /// A header block is complete: decodes it (always, even for a closed stream, so that the
    /// decoder's dynamic table stays in step with the server's encoder), then reads `:status`.
    mutating func headerBlockEnded(into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
            if responseBodyLimit != nil { streams[index].responseHeaders = fields }
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
    static func status(in fields: HPACKHeaders) -> Int? {
        guard let value = fields.first(name: ":status"), value.utf8.count == 3,
              value.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let status = Int(value), status >= 100
        else { return nil }
        return status
    }

    /// SETTINGS: applies the server's, acknowledges them, and sends what a larger window lets go.
    mutating func settings(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8]) throws(HTTP2ProtocolError) {
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
            case HTTP2Wire.Setting.headerTableSize:
                encoder.peerAllows(Int(value))
            default:
                // MAX_HEADER_LIST_SIZE: advisory. Unknown settings are ignored.
                break
            }
        }
        // Applied whole: only now are the server's limits (MAX_CONCURRENT_STREAMS) known.
        peerSettingsReceived = true
        Self.appendFrameHeader(length: 0, type: HTTP2Wire.FrameType.settings, flags: HTTP2Wire.Flag.ack, stream: 0, to: &out)
        flushPendingData(to: &out)
    }

    /// WINDOW_UPDATE: widens the connection's or a stream's send window, and sends what it lets go.
    mutating func windowUpdate(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, into out: inout [UInt8], event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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
    mutating func goAway(_ header: FrameHeader, _ payload: UnsafeRawBufferPointer, event: (HTTP2Event) -> Void) throws(HTTP2ProtocolError) {
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

}
