@testable import BenchKit
import Testing

/// Feeds `stream` to a parser in pieces of `piece` bytes and returns every response that ended,
/// with the offset in the stream where it ended.
private func frame(_ stream: String, piece: Int, expectsBody: Bool = true, closeAtEnd: Bool = false) throws -> [(ResponseParser.Completion, Int)] {
    var parser = ResponseParser()
    parser.expectsBody = expectsBody
    let bytes = Array(stream.utf8)
    var ended: [(ResponseParser.Completion, Int)] = []
    var position = 0
    while position < bytes.count {
        let end = min(bytes.count, position + piece)
        var offset = position
        while offset < end {
            let (consumed, completion) = try bytes[offset..<end].withUnsafeBytes { try parser.parse($0) }
            offset += consumed
            if let completion { ended.append((completion, offset)) }
        }
        position = end
    }
    if closeAtEnd, let completion = parser.connectionClosed() { ended.append((completion, bytes.count)) }
    return ended
}

@Suite("richpush-bench response framing")
struct ResponseParserTests {
    static let pieces = [1, 2, 3, 7, 64, 100_000]

    @Test("Content-Length, chunked with extensions and trailers, no-body statuses and an interim 100, in any split", arguments: pieces)
    func framing(piece: Int) throws {
        let first = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 5\r\n\r\nhello"
        let second = "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n5;ext=1\r\nabcde\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: yes\r\n\r\n"
        let third = "HTTP/1.1 304 Not Modified\r\nContent-Length: 900\r\n\r\n"
        let fourth = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: keep-alive, Close\r\n\r\n"
        let ended = try frame(first + second + third + fourth, piece: piece)
        #expect(ended.map(\.0) == [
            .init(status: 200, keepAlive: true), .init(status: 404, keepAlive: true),
            .init(status: 304, keepAlive: true), .init(status: 204, keepAlive: false),
        ])
        #expect(ended.map(\.1) == [first.utf8.count, (first + second).utf8.count, (first + second + third).utf8.count,
                                   (first + second + third + fourth).utf8.count])
    }

    @Test("a response to HEAD has no body whatever its Content-Length says", arguments: pieces)
    func head(piece: Int) throws {
        let response = "HTTP/1.1 200 OK\r\nContent-Length: 50404\r\n\r\n"
        let ended = try frame(response + response, piece: piece, expectsBody: false)
        #expect(ended.map(\.1) == [response.utf8.count, 2 * response.utf8.count])
    }

    @Test("HTTP/1.0 closes unless it says keep-alive; a body without a length runs to the close", arguments: pieces)
    func closes(piece: Int) throws {
        let kept = "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"
        let closed = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"
        #expect(try frame(kept + closed, piece: piece).map(\.0) == [.init(status: 200, keepAlive: true), .init(status: 200, keepAlive: false)])
        let open = "HTTP/1.1 500 Oops\r\nServer: x\r\n\r\nthe rest of the stream"
        #expect(try frame(open, piece: piece).isEmpty)
        #expect(try frame(open, piece: piece, closeAtEnd: true).map(\.0) == [.init(status: 500, keepAlive: false)])
        // An unknown transfer coding also runs to the close.
        #expect(try frame("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz", piece: piece, closeAtEnd: true).map(\.0) == [.init(status: 200, keepAlive: false)])
    }

    @Test("bare LF line ends are read as CRLF")
    func bareLineFeeds() throws {
        let ended = try frame("HTTP/1.1 201 Created\nContent-Length: 3\n\nabc", piece: 5)
        #expect(ended.map(\.0) == [.init(status: 201, keepAlive: true)])
    }

    /// A hostile stream and the words its error must carry; shown in test output by its label.
    struct Hostile: CustomTestStringConvertible, Sendable {
        let label: String
        let stream: String
        let words: String
        var testDescription: String { label }
    }

    static let hostile = [
        Hostile(label: "not HTTP", stream: "SSH-2.0-OpenSSH_9.2\r\n\r\n", words: "HTTP/1.x status line"),
        Hostile(label: "letters in the status", stream: "HTTP/1.1 2x0 OK\r\n\r\n", words: "three-digit status"),
        Hostile(label: "header without colon", stream: "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", words: "without a colon"),
        Hostile(label: "negative length", stream: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", words: "is not a length"),
        Hostile(label: "20-digit length", stream: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", words: "is not a length"),
        Hostile(label: "two lengths", stream: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", words: "two different Content-Length"),
        Hostile(label: "chunk size not hex", stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", words: "not hexadecimal"),
        Hostile(label: "empty chunk size", stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", words: "without a size"),
        Hostile(label: "16-digit chunk size", stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", words: "15 hex digits"),
        Hostile(label: "chunk longer than its size", stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", words: "longer than its size"),
        Hostile(label: "5,000-byte chunk extension", stream: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 5000) + "\r\n",
                words: "line longer than"),
        Hostile(label: "70 KB header", stream: "HTTP/1.1 200 OK\r\nX: " + String(repeating: "a", count: 70_000) + "\r\n\r\n", words: "head longer than"),
    ]

    @Test("malformed or hostile responses are errors that say what was wrong", arguments: hostile)
    func malformed(_ hostile: Hostile) throws {
        for piece in [1, 4096, 1_000_000] {
            do {
                _ = try frame(hostile.stream, piece: piece)
                Issue.record("accepted \(hostile.label) in pieces of \(piece)")
            } catch {
                #expect("\(error)".contains(hostile.words), "\(error)")
            }
        }
    }

    @Test("an endless head is refused after 64 KB, without holding more")
    func endlessHead() throws {
        var parser = ResponseParser()
        let line = Array("X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".utf8)
        var fed = Array("HTTP/1.1 200 OK\r\n".utf8).count
        _ = try Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { try parser.parse($0) }
        var refused = false
        while fed < 1_000_000 {
            do {
                _ = try line.withUnsafeBytes { try parser.parse($0) }
                fed += line.count
            } catch {
                refused = true
                break
            }
        }
        #expect(refused && fed <= ResponseParser.maxHeadBytes)
    }
}
