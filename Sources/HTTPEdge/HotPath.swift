import CoreMetrics
import HTTPTypes
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Synchronization

/// The edge's side of the hot routes: reads what they need from a request (HTTP/1.1 through
/// NIO's decoder, or an HTTP/2 stream's request), asks them, and writes, records and logs
/// their answers. Shared by every connection of a listener.
///
/// Conditional and ranged requests, `HEAD`, HTTP/1.0 and requests with two `Authorization`
/// fields never reach the routes: they are the router's.
public final class HotPath<Routes: HotRoutes>: Sendable {
    /// The application's hot routes.
    public let routes: Routes
    let accessLog: AccessLog
    /// Who the access log names as the client (`--trusted-proxy`).
    let clientAddresses: ClientAddressResolver

    /// The edge of `routes`, logging the answers `accessLog` samples with the client
    /// `clientAddresses` names.
    public init(routes: Routes, accessLog: AccessLog, clientAddresses: ClientAddressResolver = .init(trustedProxies: [])) {
        self.routes = routes
        self.accessLog = accessLog
        self.clientAddresses = clientAddresses
    }

    /// The answer to `head` if it can be given from memory now; nil sends the request to the router.
    func answer(_ head: HTTPRequestHead) -> HotAnswer? {
        // HTTP/1.1 only: the heads are encoded for it (HTTP/1.0 goes to the router).
        guard head.method == .GET, head.version == .http1_1 else { return nil }
        // One pass over the headers: conditional and ranged requests go to the router.
        var authorization: String?
        for (name, value) in head.headers {
            switch name.utf8.count {
            case 5 where name.lowercased() == "range": return nil
            case 8 where name.lowercased() == "if-range": return nil
            case 13 where name.lowercased() == "if-none-match": return nil
            case 13 where name.lowercased() == "authorization":
                // Two are the router's to refuse (it reads them joined), not one to pick here.
                guard authorization == nil else { return nil }
                authorization = value
            default: continue
            }
        }
        var memo: Routes.Memo?
        var recheck: Routes.Recheck?
        guard var answer = routes.answer(uri: head.uri, authorization: authorization, memo: &memo, recheck: &recheck) else { return nil }
        answer.close = !head.isKeepAlive
        return answer
    }

    /// The answer to an HTTP/2 stream's request if it can be given from memory now; nil sends
    /// the request to the router.
    func answer(_ request: HTTPRequest) -> HotAnswer? {
        guard request.method == .get, let path = request.path else { return nil }
        // One pass over the headers: conditional and ranged requests go to the router.
        var authorization: String?
        for field in request.headerFields {
            switch field.name {
            case .range, .ifRange, .ifNoneMatch: return nil
            case .authorization:
                guard authorization == nil else { return nil } // two are the router's to refuse
                authorization = field.value
            default: continue
            }
        }
        return answer(HotRequest(path: path, authorization: authorization))
    }

    /// The answer to an HTTP/2 request read from its header block (`H2FrameFastPath`) if it can
    /// be given from memory now; nil sends the request on to its stream.
    func answer(_ request: HotRequest) -> HotAnswer? {
        var memo: Routes.Memo?
        var recheck: Routes.Recheck?
        return routes.answer(uri: request.path, authorization: request.authorization, memo: &memo, recheck: &recheck)
    }

    /// Marks `answer` for the access log when it is one the log samples: its URI and the client
    /// (`--trusted-proxy` decides whether `forwardedFor`, read only then, names it).
    func sample(_ answer: inout HotAnswer, uri: String?, peer: @autoclosure () -> String?, forwardedFor: @autoclosure () -> [String]) {
        guard accessLog.sampled else { return }
        answer.logged = uri
        answer.remote = clientAddresses.client(peer: peer(), forwardedFor: forwardedFor())
    }

    /// Writes an HTTP/1.1 answer through `raw`, a context below any HTTP encoder: the encoded
    /// head, `Connection: close` when the client asked to close, the `Date` line and the body,
    /// in one `writev`. When the client asked to close, `connection` is closed once it is
    /// written, as the router would. Then records it (`record`).
    func writeHTTP1(_ answer: HotAnswer, through raw: ChannelHandlerContext, closing connection: ChannelHandlerContext, since start: UInt64) {
        raw.write(NIOAny(answer.head), promise: nil)
        if answer.close { raw.write(NIOAny(connectionClose), promise: nil) }
        raw.write(NIOAny(HTTPDate.line()), promise: nil)
        if answer.close {
            let bound = NIOLoopBound(connection, eventLoop: connection.eventLoop)
            raw.writeAndFlush(NIOAny(answer.body.bytes)).whenComplete { _ in bound.value.close(promise: nil) }
        } else {
            raw.writeAndFlush(NIOAny(answer.body.bytes), promise: nil)
        }
        record(answer, since: start, EdgeMetric.memoryAnswersHTTP1)
    }

    /// The answer as a file to `sendfile` over plain HTTP/1.1 (`WireFile`), when one can be had
    /// for it; nil when it is written from memory (`writeHTTP1`), as answers that close are.
    func wireFile(_ answer: HotAnswer) -> WireFile? {
        answer.close ? nil : answer.body.wireFile(answer.style, date: HTTPDate.now(), budget: routes.wireBudget)
    }

    /// HTTP/1.1 connections `FastPathFront` gave to the full pipeline (also counted in
    /// `richpush_http1_handoffs_total`, which every server of the process adds to).
    public var handOffs: Int { handOffCount.withLockedValue { $0 } }
    private let handOffCount = NIOLockedValueBox(0)

    /// Counts a connection `FastPathFront` gives to the full pipeline.
    func noteHandOff() {
        handOffCount.withLockedValue { $0 += 1 }
        EdgeMetric.frontHandOffs.increment()
    }

    /// Plain HTTP/1.1 connections the raw front (`RawFront`) gave to NIO: all but the first
    /// fetches it answered itself.
    public var adoptions: Int { adoptionCount.load(ordering: .relaxed) }
    /// Of `adoptions`, those given on with the rest of an answer the socket took only in part.
    public var adoptedRests: Int { restCount.load(ordering: .relaxed) }
    private let adoptionCount = Atomic<Int>(0)
    private let restCount = Atomic<Int>(0)

    /// Counts a connection `RawFront` gives to NIO (with `rest`: to finish an answer).
    func noteAdoption(rest: Bool = false) {
        adoptionCount.add(1, ordering: .relaxed)
        if rest { restCount.add(1, ordering: .relaxed) }
    }

    /// Records an answer written from memory `since` its request arrived (uptime, ns): the
    /// router's request metrics, the route's fetch count, `protocolCount`, and the access log
    /// when the answer is one it samples.
    func record(_ answer: HotAnswer, since start: UInt64, _ protocolCount: Counter) {
        protocolCount.increment()
        answer.metrics.requests.increment()
        answer.metrics.fetches?.increment()
        let elapsed = NIODeadline.now().uptimeNanoseconds - start
        answer.metrics.duration.recordNanoseconds(Int64(elapsed))
        if let uri = answer.logged {
            accessLog.record(method: "GET", uri: uri, status: 200, nanoseconds: elapsed, remote: answer.remote)
        }
    }
}

/// The line an HTTP/1.1 answer to a client that asked to close carries.
let connectionClose = ByteBuffer(string: "Connection: close\r\n")
