import Foundation
@testable import HTTPEdge
import Logging
import NIOConcurrencyHelpers
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The plain listener's raw front (`RawFront`): a hot request, asking to close or not, is
/// answered without NIO; everything else is given to NIO whole, with what was read; silent
/// connections close at the idle timeout and count against the connection limit until they do.
@Suite("The raw front of plain HTTP/1.1")
struct RawFrontTests {
    @Test("twenty first fetches that ask to close are answered whole, each over its own connection, and NIO makes no channel for any")
    func firstFetches() async throws {
        try await withEdge { edge in
            let answers = try await offPool {
                try (0..<20).map { index in
                    let connection = try RawConnection(port: edge.port)
                    connection.write("GET /hot/\(index % 2 == 0 ? "a" : "b") HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    let answer = try connection.response()
                    return (answer, connection.closedByServer())
                }
            }
            #expect(answers.map(\.0.body) == (0..<20).map { $0 % 2 == 0 ? "alpha" : "bravo" })
            #expect(answers.allSatisfy { $0.0.field("Connection") == "close" && $0.0.field("Date") != nil && $0.1 })
            #expect(edge.hotPath.adoptions == 0)
            #expect(edge.hotPath.handOffs == 0)
        }
    }

    @Test("half a head, then the rest: the connection goes to NIO with the half, and the request is answered")
    func halfAHead() async throws {
        try await withEdge { edge in
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /hot/a HTTP/1.1\r\nHo")
                // The rest only once the front has read the half and given the connection on.
                for _ in 0..<1_000 where edge.hotPath.adoptions == 0 { usleep(10_000) }
                connection.write("st: x\r\nConnection: close\r\n\r\n")
                return try connection.response()
            }
            #expect(answer.status == 200 && answer.body == "alpha")
            #expect(edge.hotPath.adoptions == 1)
        }
    }

    @Test("a head of 8 KiB + 1 bytes goes to NIO, whose decoder takes it, and is answered")
    func longHead() async throws {
        try await withEdge { edge in
            let start = "GET /hot/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
            let end = "\r\n\r\n"
            let head = start + String(repeating: "p", count: 8 * 1024 + 1 - start.utf8.count - end.utf8.count) + end
            #expect(head.utf8.count == 8 * 1024 + 1)
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write(head)
                return try connection.response()
            }
            #expect(answer.status == 200 && answer.body == "bravo")
            #expect(edge.hotPath.adoptions == 1)
        }
    }

    @Test("a request the hot routes do not answer, asking to close, goes to NIO and its responder")
    func miss() async throws {
        try await withEdge { edge in
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /cold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return try connection.response()
            }
            #expect(answer.status == 404 && answer.body == "no route for /cold")
            #expect(edge.hotPath.adoptions == 1)
            #expect(edge.hotPath.handOffs == 1)
        }
    }

    @Test("an answer larger than the socket takes at once, to a client that reads nothing for a while, arrives whole (its rest written by NIO): copied with its head (no room for its file) or from its wire file",
          arguments: [false, true])
    func clientNotReading(fromFile: Bool) async throws {
        // 4 MiB of numbered lines: a byte lost, doubled or moved shows.
        let big = (0..<(1 << 19)).map { String(format: "%07d\n", $0) }.joined()
        try await withEdge(texts: ["big": big], fileBudget: fromFile ? 16 << 20 : 1 << 20) { edge in
            let answer = try await offPool {
                let connection = try RawConnection(port: edge.port, receiveBuffer: 4096)
                connection.write("GET /hot/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                usleep(300_000)
                return try connection.response()
            }
            #expect(answer.status == 200)
            #expect(answer.body == big)
            #expect(edge.hotPath.adoptions == 1)
            #expect(edge.hotPath.adoptedRests == 1, "given to NIO to finish the answer")
            let filed = edge.hotPath.routes.wireBudget.bytes
            #expect(fromFile ? filed > big.utf8.count : filed == 0, "sent from its file: \(fromFile)")
        }
    }

    @Test("a body of 16 KiB or more leaves from its wire file (a sendmsg of the head, then sendfile) and arrives whole; a smaller one is copied with its head, and no file is made for it")
    func largeBodyFromItsFile() async throws {
        // 96 KiB of numbered lines: a byte lost, doubled or moved shows.
        let large = (0..<(96 * 1024 / 8)).map { String(format: "%07d\n", $0) }.joined()
        try await withEdge(texts: ["small": String(repeating: "s", count: RawFront<TableRoutes>.sendfileFloor - 1), "large": large]) { edge in
            let budget = edge.hotPath.routes.wireBudget
            let small = try await offPool {
                let connection = try RawConnection(port: edge.port)
                connection.write("GET /hot/small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return try connection.response()
            }
            #expect(small.status == 200 && small.body.utf8.count == RawFront<TableRoutes>.sendfileFloor - 1)
            #expect(budget.bytes == 0, "no file for a body under the floor")
            let answers = try await offPool {
                try (0..<3).map { _ in
                    let connection = try RawConnection(port: edge.port)
                    connection.write("GET /hot/large HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    return (try connection.response(), connection.closedByServer())
                }
            }
            for (answer, closed) in answers {
                #expect(answer.status == 200 && answer.body == large && closed)
                #expect(answer.field("Connection") == "close" && answer.field("Content-Length") == "\(large.utf8.count)" && answer.field("Date") != nil)
            }
            #expect(budget.bytes > large.utf8.count, "the answer's file was made (and is kept for its second)")
            #expect(edge.hotPath.adoptions == 0)
        }
    }

    @Test("connections that send nothing hold the connection limit until the idle timeout closes them; then the next is answered")
    func silentConnections() async throws {
        try await withEdge(idleTimeout: .seconds(1), maxConnections: 40) { edge in
            let (closed, answered) = try await offPool {
                let silent = try (0..<40).map { _ in try RawConnection(port: edge.port, timeout: 10) }
                // The limit is reached: this one waits in the backlog until the silent ones close.
                let next = try RawConnection(port: edge.port)
                next.write("GET /hot/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let answer = try next.response()
                // It was let in only once a silent one had closed.
                let closedBefore = silent.filter { $0.closedByServer(wait: false) }.count
                let closed = silent.map { $0.closedByServer() }
                return (closed, (answer, closedBefore))
            }
            #expect(closed.allSatisfy { $0 }, "\(closed.filter { !$0 }.count) of 40 silent connections were not closed")
            #expect(answered.1 > 0, "the 41st connection was answered while the 40 were open")
            let answer = answered.0
            #expect(answer.status == 200 && answer.body == "alpha")
            #expect(edge.hotPath.adoptions == 0)
        }
    }

    @Test("five thousand connections that send nothing are all closed at the idle timeout, and the listener then answers as before")
    func manySilentConnections() async throws {
        try await withEdge(idleTimeout: .seconds(2), maxConnections: 12_000) { edge in
            let (closed, answer) = try await offPool {
                var limit = rlimit()
                getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
                limit.rlim_cur = limit.rlim_max
                setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
                // Both ends are in this process: each connection takes two descriptors.
                let count = min(5_000, Int(limit.rlim_cur) / 4)
                var silent: [RawConnection] = []
                for _ in 0..<count { silent.append(try RawConnection(port: edge.port, timeout: 20)) }
                let closed = silent.filter { $0.closedByServer() }.count
                let next = try RawConnection(port: edge.port)
                next.write("GET /hot/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return (closed == count, try next.response())
            }
            #expect(closed)
            #expect(answer.status == 200 && answer.body == "bravo")
        }
    }

    @Test("the access log names the client of an answer the raw front gave as it names one NIO's front gave")
    func accessLogPeer() async throws {
        let lines = RecordedLines()
        let accessLog = AccessLog(fraction: 1, logger: Logger(label: "access") { _ in lines })
        try await withEdge(accessLog: accessLog) { edge in
            try await offPool {
                // The raw front's answer, then two written at once: NIO's front answers those.
                let client = try RawConnection(port: edge.port)
                client.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\n")
                _ = try client.response()
                client.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\nGET /hot/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                _ = try client.response()
                _ = try client.response()
            }
            #expect(edge.hotPath.adoptions == 1) // the two written at once
            // Each front logs an answer once it is written, so the client can have it first.
            for _ in 0..<1_000 where lines.remotes.count < 3 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(lines.remotes == ["127.0.0.1", "127.0.0.1", "127.0.0.1"])
        }
    }

    @Test("keep-alive: requests one at a time over one connection are answered by the raw front, copied or from their wire files, the connection kept open; a miss on it then goes to NIO with its bytes, and NIO serves the connection on")
    func keepAlive() async throws {
        let large = (0..<(64 * 1024 / 8)).map { String(format: "%07d\n", $0) }.joined()
        try await withEdge(texts: ["a": "alpha", "b": "bravo", "large": large]) { edge in
            let (answers, after) = try await offPool {
                let connection = try RawConnection(port: edge.port)
                var answers: [RawResponse] = []
                for index in 0..<12 {
                    connection.write("GET /hot/\(["a", "b", "large"][index % 3]) HTTP/1.1\r\nHost: x\r\n\r\n")
                    answers.append(try connection.response())
                }
                let raw = (edge.hotPath.adoptions, connection.closedByServer(wait: false))
                connection.write("GET /cold HTTP/1.1\r\nHost: x\r\n\r\n")
                let miss = try connection.response()
                connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let last = try connection.response()
                return (answers, (raw, miss, last, connection.closedByServer()))
            }
            #expect(answers.map(\.body) == (0..<12).map { ["alpha", "bravo", large][$0 % 3] })
            #expect(answers.allSatisfy { $0.status == 200 && $0.field("Connection") == nil && $0.field("Date") != nil })
            #expect(after.0.0 == 0 && !after.0.1, "answered by the raw front, the connection open: \(after.0)")
            #expect(edge.hotPath.routes.wireBudget.bytes > large.utf8.count, "the large answer's file was made")
            #expect(after.1.status == 404 && after.1.body == "no route for /cold")
            #expect(after.2.status == 200 && after.2.body == "alpha" && after.2.field("Connection") == "close" && after.3)
            #expect(edge.hotPath.adoptions == 1 && edge.hotPath.adoptedRests == 0)
        }
    }

    @Test("keep-alive: an answer larger than the socket takes at once, to a client that reads nothing for a while, arrives whole (its rest written by NIO), copied or from its wire file, and NIO answers the next request on the connection",
          arguments: [false, true])
    func keepAliveRest(fromFile: Bool) async throws {
        let big = (0..<(1 << 19)).map { String(format: "%07d\n", $0) }.joined()
        try await withEdge(texts: ["big": big, "a": "alpha"], fileBudget: fromFile ? 16 << 20 : 1 << 20) { edge in
            let (first, second) = try await offPool {
                let connection = try RawConnection(port: edge.port, receiveBuffer: 4096)
                connection.write("GET /hot/big HTTP/1.1\r\nHost: x\r\n\r\n")
                usleep(300_000)
                let first = try connection.response()
                connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\n")
                return (first, try connection.response())
            }
            #expect(first.status == 200 && first.body == big && first.field("Connection") == nil)
            #expect(second.status == 200 && second.body == "alpha")
            #expect(edge.hotPath.adoptions == 1 && edge.hotPath.adoptedRests == 1, "given to NIO to finish the answer")
            // (NIO's front makes a file for its small keep-alive answer.)
            let filed = edge.hotPath.routes.wireBudget.bytes
            #expect(fromFile ? filed > big.utf8.count : filed < big.utf8.count, "sent from its file: \(fromFile)")
        }
    }

    @Test("keep-alive: a connection that sends nothing after an answer is closed at the idle timeout, not before, counted from its last answer")
    func keepAliveIdle() async throws {
        try await withEdge(idleTimeout: .seconds(1)) { edge in
            let (early, closed) = try await offPool {
                let connection = try RawConnection(port: edge.port, timeout: 10)
                // Answers 0.6 s apart keep it open past one idle timeout from its start.
                for _ in 0..<3 {
                    connection.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\n")
                    guard try connection.response().body == "alpha" else { throw RawConnectionError(description: "wrong answer") }
                    usleep(600_000)
                }
                let early = connection.closedByServer(wait: false)
                return (early, connection.closedByServer())
            }
            #expect(!early, "closed within the idle timeout of its last answer")
            #expect(closed, "not closed at the idle timeout")
            #expect(edge.hotPath.adoptions == 0)
        }
    }

    @Test("a graceful shutdown closes a connection that has sent nothing, one the raw front holds after a keep-alive answer, and one NIO serves, then returns")
    func shutdown() async throws {
        let connections = try await withEdge { edge in
            try await offPool {
                let silent = try RawConnection(port: edge.port)
                let held = try RawConnection(port: edge.port)
                held.write("GET /hot/a HTTP/1.1\r\nHost: x\r\n\r\n")
                let kept = try RawConnection(port: edge.port)
                kept.write("GET /cold HTTP/1.1\r\nHost: x\r\n\r\n")
                let answers = (try held.response(), try kept.response())
                guard answers.0.body == "alpha", answers.1.status == 404, edge.hotPath.adoptions == 1 else {
                    throw RawConnectionError(description: "the keep-alive miss was not served by NIO: \(answers)")
                }
                return Connections(silent: silent, held: held, kept: kept)
            }
        }
        // `withEdge` returns once the listener's graceful shutdown has.
        #expect(connections.silent.closedByServer(wait: false), "the silent connection is still open")
        #expect(connections.held.closedByServer(wait: false), "the connection the raw front held is still open")
        #expect(connections.kept.closedByServer(wait: false), "the adopted connection is still open")
    }
}

/// Connections handed out of an edge's run, to look at after it stopped.
private struct Connections: @unchecked Sendable {
    let silent: RawConnection
    let held: RawConnection
    let kept: RawConnection
}

/// A log handler keeping the `remote` of every line logged through it.
private final class RecordedLines: LogHandler, @unchecked Sendable {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    private let kept = NIOLockedValueBox<[String]>([])

    /// Every line's `remote`, in order ("none" for a line without one).
    var remotes: [String] { kept.withLockedValue { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let remote = event.metadata?["remote"].map { "\($0)" } ?? "none"
        kept.withLockedValue { $0.append(remote) }
    }
}
