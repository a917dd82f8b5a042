/// HTTP/2 numbers from RFC 9113: the client preface, frame types, flags, settings and error codes.
public enum HTTP2Wire {
    /// What a client sends first on a connection, before its SETTINGS (RFC 9113 §3.4).
    public static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Bytes in a frame header: length (24 bits), type, flags, stream id (31 bits).
    public static let frameHeaderSize = 9
    /// The largest frame payload we accept: the default SETTINGS_MAX_FRAME_SIZE, which we never raise.
    public static let maxFrameSize = 16_384
    /// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
    public static let maxAllowedFrameSize = (1 << 24) - 1
    /// The largest a flow-control window may grow to (2^31 - 1).
    public static let maxWindow = (1 << 31) - 1
    /// The window every stream and the connection start with.
    public static let defaultWindow = 65_535
    /// The largest stream id (2^31 - 1).
    public static let maxStreamID: UInt32 = 0x7FFF_FFFF

    /// Frame types (RFC 9113 §6).
    public enum FrameType {
        public static let data: UInt8 = 0x0
        public static let headers: UInt8 = 0x1
        public static let priority: UInt8 = 0x2
        public static let rstStream: UInt8 = 0x3
        public static let settings: UInt8 = 0x4
        public static let pushPromise: UInt8 = 0x5
        public static let ping: UInt8 = 0x6
        public static let goAway: UInt8 = 0x7
        public static let windowUpdate: UInt8 = 0x8
        public static let continuation: UInt8 = 0x9
    }

    /// Frame flags; which apply depends on the frame type.
    public enum Flag {
        /// DATA, HEADERS: the sender's last frame on the stream.
        public static let endStream: UInt8 = 0x1
        /// SETTINGS, PING: an acknowledgement.
        public static let ack: UInt8 = 0x1
        /// HEADERS, CONTINUATION: the header block ends in this frame.
        public static let endHeaders: UInt8 = 0x4
        /// DATA, HEADERS: a pad length byte leads the payload and padding ends it.
        public static let padded: UInt8 = 0x8
        /// HEADERS: five bytes of priority follow the pad length.
        public static let priority: UInt8 = 0x20
    }

    /// SETTINGS identifiers (RFC 9113 §6.5.2).
    public enum Setting {
        public static let headerTableSize: UInt16 = 0x1
        public static let enablePush: UInt16 = 0x2
        public static let maxConcurrentStreams: UInt16 = 0x3
        public static let initialWindowSize: UInt16 = 0x4
        public static let maxFrameSize: UInt16 = 0x5
        public static let maxHeaderListSize: UInt16 = 0x6
    }

    /// Error codes carried by RST_STREAM and GOAWAY (RFC 9113 §7).
    public enum ErrorCode {
        public static let noError: UInt32 = 0x0
        public static let protocolError: UInt32 = 0x1
        public static let internalError: UInt32 = 0x2
        public static let flowControlError: UInt32 = 0x3
        public static let settingsTimeout: UInt32 = 0x4
        public static let streamClosed: UInt32 = 0x5
        public static let frameSizeError: UInt32 = 0x6
        public static let refusedStream: UInt32 = 0x7
        public static let cancel: UInt32 = 0x8
        public static let compressionError: UInt32 = 0x9

        /// The code's name in RFC 9113, or its number when it has none.
        public static func name(_ code: UInt32) -> String {
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
