import HTTPTypes
import NIOCore

/// What the edge asks of the application for its hottest requests: an answer it can write at
/// once from memory, on the thread that read the request (an event loop, or one of the raw
/// front's threads: it must not block), or nil to hand the request on to the router.
///
/// The edge knows no route and no store (docs/design/fast-path.md). It reads a plain `GET`'s
/// target and credentials, asks here, and writes what it is given (over plain HTTP/1.1 as a
/// file, with `sendfile`, where it can); everything else goes to the full pipeline unchanged.
/// An implementation must decide exactly as the router would: an answer here is byte for byte
/// the router's, and a request it is unsure of is the router's.
public protocol HotRoutes: AnyObject, Sendable {
    /// What a connection remembers between its requests (the key of the credentials it sent last).
    associatedtype Memo
    /// What a request may wait for before it can be answered from memory (an image due for its
    /// once-a-second check).
    associatedtype Recheck: Equatable & Sendable

    /// The answer to a plain `GET` of `uri` (origin form, query included) with `authorization`
    /// (nil when none was sent), if it can be given from memory now. `memo` is the connection's.
    /// When nil only because something is due for its check, `recheck` names it: once
    /// `recheck(_:)` is done, the request may be answered here.
    func answer(uri: String, authorization: String?, memo: inout Memo?, recheck: inout Recheck?) -> HotAnswer?

    /// Does the check `item` is due for (at most its patience).
    func recheck(_ item: Recheck) async

    /// What the answers written as files (`WireFile`) may hold at once.
    var wireBudget: WireFile.Budget { get }
}

/// A body the hot routes answer with: its bytes and its encoded heads, made once and served
/// many times. A class: the edge hands it around per request, and one reference is cheaper to
/// pass than a dozen.
public protocol HotBody: AnyObject, Sendable {
    /// The body.
    var bytes: ByteBuffer { get }
    /// The HTTP/1.1 status line and every header of the answer in `style` but `Date`, encoded.
    func head(_ style: Int) -> ByteBuffer
    /// The same answer's headers for HTTP/2 (without `Date`).
    func fields(_ style: Int) -> HTTPFields
    /// The whole HTTP/1.1 answer in `style` with `date` as a file to `sendfile`: the one already
    /// made this second, or a new one when `budget` has room; nil to write it from memory.
    func wireFile(_ style: Int, date: HTTPDate.Now, budget: WireFile.Budget) -> WireFile?
}

/// An answer from memory: a body in one of its styles (how it is cached), and the route's
/// metrics to record it in.
public struct HotAnswer {
    /// What is served.
    public var body: any HotBody
    /// Which of the body's heads (the body's own numbering).
    public var style: Int
    /// The route's request metrics.
    public var metrics: RouteMetrics
    /// The client asked to close after this answer (HTTP/1.1 `Connection: close`).
    public var close = false
    /// The request's URI when this answer is one the access log samples.
    var logged: String?
    /// The client's address, when `logged`.
    var remote: String?

    /// An answer of `body` in `style`, recorded in `metrics`.
    public init(body: any HotBody, style: Int, metrics: RouteMetrics) {
        self.body = body
        self.style = style
        self.metrics = metrics
    }

    /// The encoded head, without `Date`.
    var head: ByteBuffer { body.head(style) }
}
