/// Frames HTTP/1.1 responses in a byte stream, a chunk at a time: where each response ends, its
/// status, and whether the server keeps the connection open. Bodies are skipped, never kept.
///
/// Bounded against a hostile server: a response head may be at most `maxHeadBytes`, a chunk-size
/// or trailer line at most 4 KB, a length at most 18 digits; anything else malformed is an error.
struct ResponseParser {
    /// A response that ended.
    struct Completion: Equatable {
        var status: Int
        /// False when the server said `Connection: close` (or spoke HTTP/1.0 without keep-alive),
        /// or when the body ran to the end of the connection.
        var keepAlive: Bool
    }

    /// What was wrong with the bytes, in words.
    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    static let maxHeadBytes = 64 * 1024
    private static let maxLineBytes = 4096

    private enum State {
        case head
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        /// The CRLF after a chunk's data.
        case chunkDataEnd
        case trailer
        case untilClose
    }

    /// False for responses to HEAD, which never carry a body.
    var expectsBody = true
    private var state = State.head
    private var head: [UInt8] = []
    /// At the start of a head line (so that a further line end ends the head).
    private var atLineStart = false
    private var status = 0
    private var keepAlive = true
    private var lineBytes = 0
    private var chunkSize = 0
    private var chunkDigits = 0
    private var inExtension = false
    private var lineEmpty = true

    init() {
        head.reserveCapacity(1024)
    }

    /// True between responses: nothing of the next one has arrived.
    var isIdle: Bool {
        if case .head = state { return head.isEmpty }
        return false
    }

    /// Reads from the start of `bytes` until a response ends or the bytes run out. Returns how
    /// many bytes it took and the response that ended, if one did (the bytes after it belong to
    /// the next response).
    mutating func parse(_ bytes: UnsafeRawBufferPointer) throws(Malformed) -> (consumed: Int, completion: Completion?) {
        var index = 0
        let count = bytes.count
        while index < count {
            switch state {
            case .head:
                var end = -1
                var i = index
                while i < count {
                    let byte = bytes[i]
                    i += 1
                    if byte == 0x0A {
                        if atLineStart { end = i; break }
                        atLineStart = true
                    } else if byte != 0x0D || !atLineStart {
                        atLineStart = false
                    }
                }
                guard head.count + (i - index) <= Self.maxHeadBytes else {
                    throw Malformed(description: "response head longer than \(Self.maxHeadBytes) bytes")
                }
                head.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<i]))
                index = i
                if end >= 0 {
                    atLineStart = false
                    if let completion = try headEnded() { return (index, completion) }
                }
            case .body(let remaining):
                let take = min(remaining, count - index)
                index += take
                if take == remaining { return (index, finish()) }
                state = .body(remaining: remaining - take)
            case .chunkData(let remaining):
                let take = min(remaining, count - index)
                index += take
                state = take == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - take)
            case .untilClose:
                return (count, nil)
            case .chunkSize, .chunkDataEnd, .trailer:
                let byte = bytes[index]
                index += 1
                if let completion = try lineByte(byte) { return (index, completion) }
            }
        }
        return (index, nil)
    }

    /// The connection ended: completes a response whose body runs to the close.
    mutating func connectionClosed() -> Completion? {
        guard case .untilClose = state else { return nil }
        return finish()
    }

    /// Starts over for a new connection.
    mutating func reset() {
        state = .head
        head.removeAll(keepingCapacity: true)
        atLineStart = false
    }

    private mutating func finish() -> Completion {
        let completion = Completion(status: status, keepAlive: keepAlive)
        reset()
        return completion
    }

    /// One byte of a chunk-size line, the CRLF after a chunk, or a trailer line.
    private mutating func lineByte(_ byte: UInt8) throws(Malformed) -> Completion? {
        lineBytes += 1
        guard lineBytes <= Self.maxLineBytes else { throw Malformed(description: "chunked body line longer than \(Self.maxLineBytes) bytes") }
        switch state {
        case .chunkSize:
            if byte == 0x0A {
                guard chunkDigits > 0 else { throw Malformed(description: "chunk size line without a size") }
                lineBytes = 0
                if chunkSize == 0 {
                    state = .trailer
                    lineEmpty = true
                } else {
                    state = .chunkData(remaining: chunkSize)
                }
            } else if inExtension || byte == 0x0D {
                // Chunk extensions are ignored.
            } else if byte == 0x3B || byte == 0x20 || byte == 0x09 {
                inExtension = true
            } else if let digit = Self.hexValue(byte) {
                chunkDigits += 1
                guard chunkDigits <= 15 else { throw Malformed(description: "chunk size longer than 15 hex digits") }
                chunkSize = chunkSize << 4 | digit
            } else {
                throw Malformed(description: "chunk size is not hexadecimal")
            }
        case .chunkDataEnd:
            if byte == 0x0A {
                beginChunk()
            } else if byte != 0x0D {
                throw Malformed(description: "chunk data longer than its size")
            }
        case .trailer:
            if byte == 0x0A {
                if lineEmpty { return finish() }
                lineEmpty = true
                lineBytes = 0
            } else if byte != 0x0D {
                lineEmpty = false
            }
        default:
            break
        }
        return nil
    }

    private mutating func beginChunk() {
        state = .chunkSize
        chunkSize = 0
        chunkDigits = 0
        inExtension = false
        lineBytes = 0
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }

    /// The head is complete: reads the status and the framing headers, and sets up the body.
    /// Allocation-free: names are matched byte by byte and only the framing values are read.
    private mutating func headEnded() throws(Malformed) -> Completion? {
        let framing = try head.withUnsafeBytes { bytes in Result { () throws(Malformed) in try Self.framing(of: bytes) } }.get()
        head.removeAll(keepingCapacity: true)
        status = framing.status
        keepAlive = framing.keepAlive
        if (100..<200).contains(status) {
            // An interim response: the real one follows.
            state = .head
            return nil
        }
        if !expectsBody || status == 204 || status == 304 { return finish() }
        if framing.transferEncoded {
            if framing.chunked {
                beginChunk()
            } else {
                state = .untilClose
                keepAlive = false
            }
        } else if let contentLength = framing.contentLength {
            if contentLength == 0 { return finish() }
            state = .body(remaining: contentLength)
        } else {
            state = .untilClose
            keepAlive = false
        }
        return nil
    }

    private struct Framing {
        var status = 0
        var keepAlive = true
        var contentLength: Int?
        var transferEncoded = false
        var chunked = false
    }

    private static func framing(of head: UnsafeRawBufferPointer) throws(Malformed) -> Framing {
        var framing = Framing()
        var lineStart = 0
        var first = true
        var minorVersion: UInt8 = 0
        var sawClose = false, sawKeepAlive = false
        while lineStart < head.count {
            var lineEnd = lineStart
            while lineEnd < head.count && head[lineEnd] != 0x0A { lineEnd += 1 }
            let next = lineEnd + 1
            if lineEnd > lineStart && head[lineEnd - 1] == 0x0D { lineEnd -= 1 }
            let line = UnsafeRawBufferPointer(rebasing: head[lineStart..<lineEnd])
            lineStart = next
            if first {
                first = false
                guard line.count >= 12, line.starts(with: "HTTP/1.".utf8), line[8] == 0x20 else {
                    throw Malformed(description: "response does not start with an HTTP/1.x status line")
                }
                minorVersion = line[7]
                guard line[9...11].allSatisfy({ (0x30...0x39).contains($0) }), line.count == 12 || line[12] == 0x20 else {
                    throw Malformed(description: "status line has no three-digit status code")
                }
                framing.status = line[9...11].reduce(0) { $0 * 10 + Int($1 - 0x30) }
                continue
            }
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: 0x3A) else { throw Malformed(description: "header line without a colon") }
            let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
            let value = trimmed(UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]))
            if equalsIgnoringCase(name, "content-length") {
                guard !value.isEmpty, value.count <= 18, value.allSatisfy({ (0x30...0x39).contains($0) }) else {
                    throw Malformed(description: "Content-Length '\(String(decoding: value, as: UTF8.self))' is not a length")
                }
                let length = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                if let known = framing.contentLength, known != length { throw Malformed(description: "two different Content-Length values") }
                framing.contentLength = length
            } else if equalsIgnoringCase(name, "transfer-encoding") {
                framing.transferEncoded = true
                var last = value
                if let comma = value.lastIndex(of: 0x2C) { last = trimmed(UnsafeRawBufferPointer(rebasing: value[(comma + 1)...])) }
                framing.chunked = equalsIgnoringCase(last, "chunked")
            } else if equalsIgnoringCase(name, "connection") {
                for token in value.split(separator: 0x2C) {
                    let token = trimmed(UnsafeRawBufferPointer(rebasing: token))
                    if equalsIgnoringCase(token, "close") { sawClose = true }
                    if equalsIgnoringCase(token, "keep-alive") { sawKeepAlive = true }
                }
            }
        }
        framing.keepAlive = minorVersion == 0x30 ? sawKeepAlive && !sawClose : !sawClose
        return framing
    }

    private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = bytes.startIndex, end = bytes.endIndex
        while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
        while end > start && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// `bytes` equals `lowercase` (ASCII, lower case) ignoring case.
    private static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        guard bytes.count == lowercase.utf8CodeUnitCount else { return false }
        let expected = lowercase.utf8Start
        for i in 0..<bytes.count {
            var byte = bytes[i]
            if byte >= 0x41 && byte <= 0x5A { byte |= 0x20 }
            if byte != expected[i] { return false }
        }
        return true
    }
}
