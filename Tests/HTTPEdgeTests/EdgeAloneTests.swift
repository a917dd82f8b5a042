import Foundation
import HTTPEdge
import HTTPTypes
import HummingbirdCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import ServiceLifecycle
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The edge on its own, through its public API only: an `HTTPListener` answering hot routes of
/// its own (`TableRoutes`) from memory, and handing everything else to a responder that answers
/// 404, with no store and no router of RichPush behind it.
@Suite("The edge alone, without RichPush's store or router")
struct EdgeAloneTests {
    @Test("a hot GET is answered from memory: status 200, the body exactly, the route's headers and a Date; the connection stays on the front")
    func hotAnswer() async throws {
        try await withEdge { edge in
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\n")
                return try connection.response()
            }
            #expect(answer.statusLine == "HTTP/1.1 200 OK")
            #expect(answer.body == "alpha")
            #expect(answer.headerLines.filter { !$0.hasPrefix("Date: ") } == ["Content-Type: text/plain", "Content-Length: 5"])
            #expect(answer.field("Date")?.hasSuffix(" GMT") == true, "\(answer.headerLines)")
            #expect(edge.hotPath.handOffs == 0)
            // Keep-alive: the raw front answers it too, and keeps the connection.
            #expect(edge.hotPath.adoptions == 0)
        }
    }

    @Test("a request the hot routes do not answer, after a hot one on the same connection, is the responder's 404; a hot request after it is still answered from memory")
    func coldHandedOn() async throws {
        try await withEdge { edge in
            let answers = try await offPool {
                let connection = try RawConnection(port: edge.port)
                return try ["/hot/a", "/cold", "/hot/b"].map { path in
                    connection.write("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                    return try connection.response()
                }
            }
            #expect(answers.map(\.status) == [200, 404, 200])
            #expect(answers.map(\.body) == ["alpha", "no route for /cold", "bravo"])
            #expect(answers[2].field("Date") != nil)
            #expect(edge.hotPath.handOffs == 1)
        }
    }

    @Test("two hot requests pipelined in one write get their two answers, in order")
    func pipelined() async throws {
        try await withEdge { edge in
            let answers = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\nGET /hot/b HTTP/1.1\r\nHost: x\r\n\r\n")
                let first = try connection.response()
                let second = try connection.response()
                return [first, second]
            }
            #expect(answers.map(\.status) == [200, 200])
            #expect(answers.map(\.body) == ["alpha", "bravo"])
        }
    }

    @Test("a hot request with Connection: close is answered with Connection: close, and the server then closes the connection")
    func connectionClose() async throws {
        try await withEdge { edge in
            let (answer, closed) = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let answer = try connection.response()
                return (answer, connection.closedByServer())
            }
            #expect(answer.status == 200 && answer.body == "alpha")
            #expect(answer.field("Connection") == "close")
            #expect(answer.field("Date") != nil)
            #expect(closed, "the server left the connection open")
            #expect(edge.hotPath.handOffs == 0)
            // Answered by the raw front: NIO never made a channel for it.
            #expect(edge.hotPath.adoptions == 0)
        }
    }

    @Test("a request whose answer waits for a check is answered from memory once the routes' check has run")
    func dueForCheck() async throws {
        try await withEdge { edge in
            #expect(edge.routes.rechecked.isEmpty)
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /due/x HTTP/1.1\r\nHost: x\r\n\r\n")
                return try connection.response()
            }
            #expect(answer.status == 200 && answer.body == "x-ray")
            #expect(edge.routes.rechecked == ["x"])
            #expect(edge.hotPath.handOffs == 0)
        }
    }
}

// MARK: - Hot routes of the test's own

/// A `text/plain` body the edge serves as it is: its bytes, its head encoded once (the status
/// line, `Content-Type` and `Content-Length`, each line ending in CRLF: everything but the `Date`
/// line and the blank line, which the edge appends), the same headers for HTTP/2, and the whole
/// answer of the current second as a file (`WireFile`), made as `ServedBlob.wireFile` makes its own.
final class StaticBody: HotBody {
    let bytes: ByteBuffer
    /// The name the body's files carry (`richpush <name>`).
    private let name: String
    /// The status line and headers but `Date`, each line ending in CRLF.
    private let encodedHead: ByteBuffer
    /// The file of the latest second one was made for; not kept here (the budget and the
    /// connections writing it keep it).
    private let latest = NIOLockedValueBox(Latest())

    /// A second, and the file made for it while anything still keeps that file.
    private struct Latest {
        var second = -1
        weak var file: WireFile?
    }

    /// The body `text`, whose files are named after `name`.
    init(name: String, text: String) {
        self.name = name
        bytes = ByteBuffer(string: text)
        encodedHead = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\n")
    }

    func head(_ style: Int) -> ByteBuffer { encodedHead }

    func fields(_ style: Int) -> HTTPFields {
        [.contentType: "text/plain", .contentLength: "\(bytes.readableBytes)"]
    }

    func wireFile(_ style: Int, date: HTTPDate.Now, budget: WireFile.Budget) -> WireFile? {
        let current = latest.withLockedValue { $0 }
        guard date.second > current.second else { return date.second == current.second ? current.file : nil }
        let (head, body) = (encodedHead, bytes)
        let made = WireFile(budget: budget, name: name, second: date.second,
                            count: head.readableBytes + date.line.readableBytes + body.readableBytes) { file in
            file.writeImmutableBuffer(head)
            file.writeImmutableBuffer(date.line)
            file.writeImmutableBuffer(body)
        }
        return latest.withLockedValue { state in
            // Of two made at once, the first in stays.
            if state.second >= date.second { return state.second == date.second ? state.file : nil }
            state = Latest(second: date.second, file: made)
            return made
        }
    }
}

/// Hot routes answering from a table, with nothing behind them: `GET /hot/<name>` is answered
/// at once with the body of `<name>`; `GET /hot/<name>` of a name not in the table, and every
/// other path, are the responder's. `GET /due/<name>` is like a cached image due for its
/// once-a-second check: until `recheck(<name>)` has run, it is not answered and names that check
/// (the edge waits for it), and from then on it is answered with `<name>`'s body.
final class TableRoutes: HotRoutes {
    typealias Memo = Int
    typealias Recheck = String

    /// The bodies, by name.
    let bodies: [String: StaticBody]
    let wireBudget: WireFile.Budget
    private let metrics = RouteMetrics(route: "/hot/{name}")
    private let checked = NIOLockedValueBox<[String]>([])

    /// Routes serving each of `texts` under its name, with `fileBudget` bytes for their wire files.
    init(_ texts: [String: String], fileBudget: Int = 1 << 20) {
        wireBudget = WireFile.Budget(limit: fileBudget)
        bodies = Dictionary(uniqueKeysWithValues: texts.map { ($0.key, StaticBody(name: $0.key, text: $0.value)) })
    }

    /// The names `recheck(_:)` has been called with, in order.
    var rechecked: [String] { checked.withLockedValue { $0 } }

    func answer(uri: String, authorization: String?, memo: inout Int?, recheck: inout String?) -> HotAnswer? {
        if uri.hasPrefix("/hot/"), let body = bodies[String(uri.dropFirst(5))] {
            return HotAnswer(body: body, style: 0, metrics: metrics)
        }
        guard uri.hasPrefix("/due/") else { return nil }
        let name = String(uri.dropFirst(5))
        guard let body = bodies[name] else { return nil }
        guard checked.withLockedValue({ $0.contains(name) }) else {
            recheck = name
            return nil
        }
        return HotAnswer(body: body, style: 0, metrics: metrics)
    }

    func recheck(_ item: String) async {
        checked.withLockedValue { $0.append(item) }
    }
}

// MARK: - A running edge

/// A running edge: the port it listens on, and its hot path, whose `handOffs` counts the
/// connections the front gave to the full pipeline.
struct RunningEdge: Sendable {
    let port: Int
    let hotPath: HotPath<TableRoutes>
    /// The hot routes it answers from.
    var routes: TableRoutes { hotPath.routes }
}

/// The listener never said it was bound.
struct EdgeNotListening: Error {}

/// Runs an edge as `RichPushApplication.run()` builds one, in a service group: an `HTTPListener`
/// on 127.0.0.1 at a port of the system's choosing, plain HTTP/1.1 with the front, the full
/// pipeline behind it (`FastPathHTTP1Channel`) and a responder answering 404 with the path for
/// everything the hot routes (`TableRoutes` of `a`, `b` and `x`) do not answer. Runs `body` with
/// it, then shuts it down gracefully and waits for it to stop.
/// `texts` are the hot routes' bodies; `idleTimeout` and `maxConnections` are the listener's;
/// `accessLog` is the hot path's.
func withEdge<T: Sendable>(texts: [String: String] = ["a": "alpha", "b": "bravo", "x": "x-ray"], idleTimeout: Duration = .seconds(30),
                           maxConnections: Int = 64, accessLog: AccessLog = AccessLog(fraction: 0, logger: Logger(label: "test")),
                           fileBudget: Int = 1 << 20, _ body: @Sendable (RunningEdge) async throws -> T) async throws -> T {
    var logger = Logger(label: "edge-alone")
    logger.logLevel = .warning
    let hotPath = HotPath(routes: TableRoutes(texts, fileBudget: fileBudget), accessLog: accessLog)
    // Written as `RichPushApplication`'s responder writes the router's responses.
    let responder: HTTPChannelHandler.Responder = { request, writer, _ in
        let response = Response(status: .notFound, headers: [.contentType: "text/plain"],
                                body: ResponseBody(byteBuffer: ByteBuffer(string: "no route for \(request.uri.path)")))
        try await writer.write(response: response.head, body: response.body)
    }
    let channel = FastPathHTTP1Channel(responder: responder, fastPath: hotPath, headTimeout: .seconds(10), idleTimeout: idleTimeout)
    let http2 = FastPathHTTP2Connection(fastPath: hotPath, bodyRate: channel.bodyRate, idleTimeout: channel.idleTimeout)
    let (ports, bound) = AsyncStream.makeStream(of: Int.self)
    let listener = HTTPListener(channel: channel, tls: nil, http2: http2, host: "127.0.0.1", port: 0, backlog: 64, maxConnections: maxConnections,
                                eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: logger,
                                onServerRunning: { server in
                                    if let port = server.localAddress?.port { bound.yield(port) }
                                    bound.finish()
                                })
    let group = ServiceGroup(configuration: .init(services: [listener], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            defer { bound.finish() } // a listener that fails to bind ends the wait for its port
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll() // the listener's own error, when it has one
            throw EdgeNotListening()
        }
        do {
            let value = try await body(RunningEdge(port: port, hotPath: hotPath))
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return value
        } catch {
            await group.triggerGracefulShutdown()
            throw error
        }
    }
}

// MARK: - A raw HTTP/1.1 client

/// Runs blocking socket work on a thread of its own: Swift Testing runs tests on the cooperative
/// pool (two threads on this machine), and a blocked pool would starve the responder's tasks.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// Why a raw exchange failed.
struct RawConnectionError: Error, CustomStringConvertible {
    let description: String
}

/// One HTTP/1.1 response as a raw client read it.
struct RawResponse: Sendable {
    /// `HTTP/1.1 200 OK`.
    let statusLine: String
    /// The header lines, as sent, without their CRLF.
    let headerLines: [String]
    /// The body, as text.
    let body: String

    /// The status code, nil when the status line has none.
    var status: Int? {
        let parts = statusLine.split(separator: " ")
        return parts.count >= 2 ? Int(parts[1]) : nil
    }

    /// The value of the first header named `name` (case-insensitively), trimmed; nil when there is none.
    func field(_ name: String) -> String? {
        for line in headerLines {
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name.lowercased() else { continue }
            return String(line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" })
        }
        return nil
    }
}

/// A blocking TCP connection to 127.0.0.1, speaking raw HTTP/1.1: what is written goes out as
/// is, and responses are read one at a time (framed by `Content-Length`), so that pipelined
/// answers can be told apart. Every read gives up after the receive timeout. Use it off the
/// cooperative pool (`offPool`); it is closed when it goes.
final class RawConnection {
    private let fd: Int32
    /// Bytes received and not yet read as a response.
    private var received: [UInt8] = []

    /// Connects to `port` on 127.0.0.1; each read waits at most `timeout` seconds. With
    /// `receiveBuffer`, the socket's receive buffer is that small (set before connecting, so
    /// the window the server sees is small too).
    init(port: Int, timeout: Int = 10, receiveBuffer: Int? = nil) throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw RawConnectionError(description: "no socket (errno \(errno))") }
        if var size = receiveBuffer.map(Int32.init) {
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw RawConnectionError(description: "cannot connect to 127.0.0.1:\(port) (errno \(errno))")
        }
        var wait = timeval(tv_sec: timeout, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
    }

    deinit {
        close(fd)
    }

    /// Sends `text` as it is, in as few writes as the socket takes.
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    /// The next response; throws when the connection ends, or the timeout passes, before a whole one.
    func response() throws -> RawResponse {
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            if let response = takeResponse() { return response }
            let count = recv(fd, &chunk, chunk.count, 0)
            guard count > 0 else {
                throw RawConnectionError(description: "no whole response (recv \(count)): \(String(decoding: received, as: UTF8.self).debugDescription)")
            }
            received += chunk[0..<count]
        }
    }

    /// Whether the server closes the connection with nothing more sent: the end of the stream
    /// comes before the receive timeout (with `wait` false: has already come).
    func closedByServer(wait: Bool = true) -> Bool {
        guard received.isEmpty else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, wait ? 0 : Int32(MSG_DONTWAIT)) == 0
    }

    /// The first whole response among the bytes received, taken out of them; nil while there is none.
    private func takeResponse() -> RawResponse? {
        guard let headEnd = Self.blankLine(in: received) else { return nil }
        let lines = String(decoding: received[..<headEnd], as: UTF8.self).split(separator: "\r\n").map(String.init)
        let headerLines = Array(lines.dropFirst())
        let partial = RawResponse(statusLine: lines.first ?? "", headerLines: headerLines, body: "")
        let length = partial.field("Content-Length").flatMap { Int($0) } ?? 0
        let bodyStart = headEnd + 4
        guard received.count >= bodyStart + length else { return nil }
        let body = String(decoding: received[bodyStart..<bodyStart + length], as: UTF8.self)
        received.removeFirst(bodyStart + length)
        return RawResponse(statusLine: partial.statusLine, headerLines: headerLines, body: body)
    }

    /// Where the first CRLF CRLF in `bytes` begins.
    private static func blankLine(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}
