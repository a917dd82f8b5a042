import Foundation
import Logging
import NIOCore

/// A request head as the front of an HTTP/1.1 connection reads it: only a plain `GET` that the
/// fast path may answer, read without NIO's decoder and without allocating per header.
///
/// The reading is strict on purpose. Anything this does not recognise at once (another method
/// or version, an absolute or `*` target, a header line that is not `token ":" value`, a
/// control character, a folded line, a bare CR or LF, a body, an `Upgrade`, a range or
/// condition, more than 100 fields or 8 KiB) is not refused here: `FastPathFront` hands the
/// bytes, untouched, to the full pipeline, whose decoder and router answer them as always.
struct FrontRequestHead: Equatable {
    /// The request target, as sent (origin form).
    var uri: String
    /// The `Authorization` value (a head with two is handed off).
    var authorization: String?
    /// The client asked to close after the answer (a `close` token in `Connection`).
    var close: Bool
    /// Every `X-Forwarded-For` value, in order (the access log reads them for the answers it samples).
    var forwardedFor: [String]
    /// The head's length in bytes, up to and including its blank line.
    var length: Int

    /// Heads longer than this go to the full pipeline (NIO's decoder takes up to 32 KiB).
    static let maximumLength = 8 << 10
    /// As NIO's decoder is configured (`HTTP1DecoderLimits.value`).
    static let maximumFields = 100

    /// What the front makes of the bytes at the start of `bytes`.
    enum Reading: Equatable {
        /// A complete head the fast path may answer.
        case head(FrontRequestHead)
        /// No complete head: not all of it has arrived, or it is not one this reads.
        case handOff
    }

    /// Reads the head at the start of `bytes`.
    static func read(_ bytes: UnsafeRawBufferPointer) -> Reading {
        let count = min(bytes.count, maximumLength)
        guard count >= 18 else { return .handOff } // "GET / HTTP/1.1\r\n\r\n"
        // The request line: exactly "GET " origin-form " HTTP/1.1" CRLF.
        guard bytes[0] == UInt8(ascii: "G"), bytes[1] == UInt8(ascii: "E"), bytes[2] == UInt8(ascii: "T"),
              bytes[3] == UInt8(ascii: " "), bytes[4] == UInt8(ascii: "/") else { return .handOff }
        var i = 4
        while i < count, isTargetByte(bytes[i]) { i += 1 }
        let targetEnd = i
        let version = Array(" HTTP/1.1\r\n".utf8)
        guard i + version.count <= count else { return .handOff }
        for byte in version {
            guard bytes[i] == byte else { return .handOff }
            i += 1
        }
        var head = FrontRequestHead(uri: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[4..<targetEnd]), as: UTF8.self),
                                    authorization: nil, close: false, forwardedFor: [], length: 0)
        // Header lines, until the blank line.
        var fields = 0
        while true {
            guard i + 1 < count else { return .handOff }
            if bytes[i] == UInt8(ascii: "\r") {
                guard bytes[i + 1] == UInt8(ascii: "\n") else { return .handOff }
                head.length = i + 2
                return .head(head)
            }
            fields += 1
            guard fields <= maximumFields else { return .handOff }
            // The name: one or more token characters, then the colon (no space before it).
            let nameStart = i
            while i < count, isTokenByte(bytes[i]) { i += 1 }
            guard i < count, i > nameStart, bytes[i] == UInt8(ascii: ":") else { return .handOff }
            let name = UnsafeRawBufferPointer(rebasing: bytes[nameStart..<i])
            i += 1
            // The value: visible characters, spaces and tabs, trimmed; the line ends in CRLF.
            while i < count, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") { i += 1 }
            let valueStart = i
            var valueEnd = i
            while i < count, bytes[i] != UInt8(ascii: "\r") {
                let byte = bytes[i]
                guard byte >= 0x20 && byte != 0x7F || byte == UInt8(ascii: "\t") else { return .handOff }
                i += 1
                if byte != UInt8(ascii: " ") && byte != UInt8(ascii: "\t") { valueEnd = i }
            }
            guard i + 1 < count, bytes[i + 1] == UInt8(ascii: "\n") else { return .handOff }
            i += 2
            let value = UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd])
            switch Field(name) {
            case .handOff: return .handOff
            case .authorization:
                // Two are the router's to refuse (it reads them joined), not one to pick here.
                guard head.authorization == nil else { return .handOff }
                head.authorization = String(decoding: value, as: UTF8.self)
            case .connection:
                if hasToken(value, "close") { head.close = true }
                if hasToken(value, "upgrade") { return .handOff }
            case .forwardedFor: head.forwardedFor.append(String(decoding: value, as: UTF8.self))
            case .other: break
            }
        }
    }

    /// The fields the front looks at.
    private enum Field {
        case authorization, connection, forwardedFor
        /// A range, a condition, a body or an upgrade: the full pipeline's.
        case handOff
        case other

        init(_ name: UnsafeRawBufferPointer) {
            func named(_ lowercase: StaticString) -> Bool {
                guard name.count == lowercase.utf8CodeUnitCount else { return false }
                let expected = UnsafeRawBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
                for (byte, wanted) in zip(name, expected) where byte | 0x20 != wanted { return false }
                return true
            }
            switch name.count {
            case 5 where named("range"): self = .handOff
            case 7 where named("upgrade"): self = .handOff
            case 8 where named("if-range"): self = .handOff
            case 10 where named("connection"): self = .connection
            case 13 where named("authorization"): self = .authorization
            case 13 where named("if-none-match"): self = .handOff
            case 14 where named("content-length"): self = .handOff
            case 15 where named("x-forwarded-for"): self = .forwardedFor
            case 17 where named("transfer-encoding"): self = .handOff
            default: self = .other
            }
        }
    }

    /// Whether the comma-separated `list` has `token` (case-insensitively), as NIO reads `Connection`.
    private static func hasToken(_ list: UnsafeRawBufferPointer, _ token: StaticString) -> Bool {
        let wanted = UnsafeRawBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
        for element in list.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
            let trimmed = element.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
            if trimmed.count == wanted.count, zip(trimmed, wanted).allSatisfy({ $0 | 0x20 == $1 }) { return true }
        }
        return false
    }

    /// A byte of a request target this reads: visible ASCII other than `#`.
    private static func isTargetByte(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "#")
    }

    /// RFC 9110's `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

/// The whole pipeline of a new HTTP/1.1 connection until it needs more (docs/design/fast-path.md, issue #28):
/// it reads plain `GET`s itself and answers them from `FastPath`, and builds the full pipeline
/// (NIO's HTTP codec, the deadlines, the fast path's own handler, Hummingbird's router behind
/// an async channel) only when a request needs it. A phone that fetches its payload over a new
/// connection, or a client that only ever fetches cached images, never costs the eleven
/// handlers, the decoder's allocations and the task a routed request needs.
///
/// A request for a cached image that is due for its once-a-second check (not asked for in the
/// last second) waits here for that check, at most its patience, as the router would wait:
/// the first burst after a quiet second keeps its connections on this path.
///
/// It hands over the first time anything is not a complete head the fast path answers: a
/// request it does not read (`FrontRequestHead`), a cache miss, a head that has not arrived
/// whole in what has been read (so a slow head meets the full pipeline's deadline), an answer
/// to close with more bytes behind it, an event other than the end of input or a graceful
/// shutdown, or any event while a request waits for its image's check. The bytes it has not answered go to the full pipeline as they arrived, then the
/// event; the answers already written stay ahead of them. Until then it keeps the connection's
/// idle timeout itself, closes on a graceful shutdown or the end of input once its answers are
/// written, and closes on an error. A connection it is closing is closed at the idle timeout at
/// the latest, even if the client never reads its answer.
final class FastPathFront<Routes: HotRoutes>: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let fastPath: HotPath<Routes>
    private let idleTimeout: TimeAmount
    /// The connection is plain TCP: answers go out as files (`WireFile`) where they can.
    private let wireFiles: Bool
    /// The files this connection's writes may still be reading.
    private var held = WireFile.Holder()
    /// The bytes read while a cached image's check is under way (from the request that waits
    /// for it on), and when they began to arrive (uptime, ns).
    private var waiting: (bytes: ByteBuffer, since: UInt64)?
    /// The image whose check the requests just resumed waited for: due again, it is the router's.
    private var rechecked: Routes.Recheck?
    /// Within `channelRead` (NIO completes the read after it).
    private var reading = false
    /// Adds the full pipeline after this handler.
    private let buildPipeline: (any Channel) throws -> Void
    private var handedOff = false
    private var closing = false
    /// Something has been answered here.
    private var answered = false
    /// The idle timer, armed once per idle period; it checks `lastActive` when it fires.
    private var idleTimer: Scheduled<Void>?
    private var lastActive = NIODeadline.now()
    /// The key of the credentials this connection sent last.
    private var credentials: Routes.Memo?

    init(fastPath: HotPath<Routes>, idleTimeout: TimeAmount, wireFiles: Bool, buildPipeline: @escaping (any Channel) throws -> Void) {
        self.fastPath = fastPath
        self.idleTimeout = idleTimeout
        self.wireFiles = wireFiles
        self.buildPipeline = buildPipeline
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { armIdleTimer(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        armIdleTimer(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        idleTimer?.cancel()
        idleTimer = nil
        waiting = nil
        // NIO has failed the writes still pending: the files are read no more.
        _ = held.takeAll()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !handedOff else { return context.fireChannelRead(data) }
        guard !closing else { return } // answered with `Connection: close`: the rest is not read
        var bytes = unwrapInboundIn(data)
        reading = true
        defer { reading = false }
        // One clock read for both (the answers' durations are timed on NIO's clock too).
        lastActive = .now()
        if var pending = waiting {
            // Behind a request that waits for its image's check: bounded as a head is.
            waiting = nil
            pending.bytes.writeBuffer(&bytes)
            guard pending.bytes.readableBytes <= FrontRequestHead.maximumLength else { return handOff(context: context, bytes: pending.bytes) }
            waiting = pending
            return
        }
        serve(bytes, since: lastActive.uptimeNanoseconds, context: context)
    }

    /// Answers the requests in `bytes`, read at `start`, until one needs the full pipeline or
    /// waits for its image's check.
    private func serve(_ bytes: ByteBuffer, since start: UInt64, context: ChannelHandlerContext) {
        var bytes = bytes
        while bytes.readableBytes > 0 {
            let parsed = bytes.withUnsafeReadableBytes { FrontRequestHead.read($0) }
            // An answer that closes must be the last thing sent: otherwise the router's lingering close.
            guard case .head(let head) = parsed, !(head.close && bytes.readableBytes > head.length) else {
                return handOff(context: context, bytes: bytes)
            }
            var recheck: Routes.Recheck?
            guard var answer = fastPath.routes.answer(uri: head.uri, authorization: head.authorization, memo: &credentials, recheck: &recheck) else {
                // An image not asked for in the last second is checked against the store before
                // it is served again. Waiting for that here keeps the connection on this path;
                // the router would make the same check, and keep the connection for good.
                if let recheck, recheck != rechecked { return waitForCheck(of: recheck, bytes: bytes, since: start, context: context) }
                return handOff(context: context, bytes: bytes)
            }
            rechecked = nil
            answer.close = head.close
            fastPath.sample(&answer, uri: head.uri, peer: context.remoteAddress?.ipAddress, forwardedFor: head.forwardedFor)
            bytes.moveReaderIndex(forwardBy: head.length)
            write(answer, start: start, context: context)
        }
    }

    /// Holds `bytes` (a request for image `id`, and what follows it) until the image's check
    /// is done (`HotRoutes.recheck`, at most its patience), then answers them.
    private func waitForCheck(of id: Routes.Recheck, bytes: ByteBuffer, since start: UInt64, context: ChannelHandlerContext) {
        waiting = (bytes, start)
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        let (loop, routes) = (context.eventLoop, fastPath.routes)
        Task {
            await routes.recheck(id)
            loop.execute {
                let (context, front) = bound.value
                // Handed off, or closed, meanwhile: nothing waits any more.
                guard let pending = front.waiting else { return }
                front.waiting = nil
                front.rechecked = id
                front.serve(pending.bytes, since: pending.since, context: context)
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.fireChannelReadComplete()
    }

    /// Writes the answer: over plain TCP as its file (one `sendfile`), where the budget has
    /// one and this connection can hold it; otherwise as `FastPathHandler` does
    /// (`FastPath.writeHTTP1`: one `writev`, then the close when the client asked for it).
    private func write(_ answer: HotAnswer, start: UInt64, context: ChannelHandlerContext) {
        answered = true
        if answer.close { startClosing(context) }
        guard wireFiles, let file = fastPath.wireFile(answer), let region = file.region(on: context.eventLoop) else {
            return fastPath.writeHTTP1(answer, through: context, closing: context, since: start)
        }
        let (allowed, confirm) = held.hold(file)
        // Once the write `confirm` names is done, so are the ones before it: their files can go.
        let released = confirm.map { confirm in
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            return { @Sendable (_: Result<Void, any Error>) in bound.value.held.release(before: confirm) }
        }
        guard allowed else {
            fastPath.writeHTTP1(answer, through: context, closing: context, since: start)
            if let released { context.writeAndFlush(NIOAny(ByteBuffer())).whenComplete(released) }
            return
        }
        if let released {
            context.writeAndFlush(NIOAny(IOData.fileRegion(region))).whenComplete(released)
        } else {
            context.writeAndFlush(NIOAny(IOData.fileRegion(region)), promise: nil)
        }
        fastPath.record(answer, since: start, EdgeMetric.memoryAnswersHTTP1)
    }

    /// Builds the full pipeline behind this handler, gives it `bytes` and `event` (when any)
    /// and leaves.
    private func handOff(context: ChannelHandlerContext, bytes: ByteBuffer? = nil, event: Any? = nil) {
        handedOff = true
        waiting = nil
        idleTimer?.cancel()
        idleTimer = nil
        // The files written here stay open until the writes so far are done (writes complete in order).
        let files = held.takeAll()
        if !files.isEmpty { context.writeAndFlush(NIOAny(ByteBuffer())).whenComplete { _ in withExtendedLifetime(files) {} } }
        fastPath.noteHandOff()
        do {
            try buildPipeline(context.channel)
            // A graceful close must wait for the answers written here too.
            if answered { try context.pipeline.syncOperations.handler(type: FastPathHandler<Routes>.self).noteEarlierAnswers() }
        } catch {
            context.close(promise: nil)
            return
        }
        if let bytes, bytes.readableBytes > 0 {
            context.fireChannelRead(wrapInboundOut(bytes))
            // Bytes held for a check are handed over after their read: the async channel behind
            // delivers what it has read when a read completes.
            if !reading { context.fireChannelReadComplete() }
        }
        if let event { context.fireUserInboundEventTriggered(event) }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard !handedOff else { return context.fireUserInboundEventTriggered(event) }
        // A request waits for its image's check: the full pipeline answers it, then sees the event.
        if let pending = waiting { return handOff(context: context, bytes: pending.bytes, event: event) }
        switch event {
        case is ChannelShouldQuiesceEvent, ChannelEvent.inputClosed:
            // Shutting down, or the client has finished sending: nothing is being received here
            // (a head arrives whole or is handed over), so close once the answers are written.
            closeAfterWrites(context)
        default:
            handOff(context: context, event: event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !handedOff else { return context.fireErrorCaught(error) }
        context.close(promise: nil)
    }

    private func closeAfterWrites(_ context: ChannelHandlerContext) {
        guard !closing else { return }
        startClosing(context)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        // Writes complete in order: an empty write's promise marks the moment all earlier ones have.
        context.writeAndFlush(NIOAny(ByteBuffer())).whenComplete { _ in bound.value.close(promise: nil) }
    }

    /// Closing once the answers are written: a client that never reads them is closed at the
    /// idle timeout.
    private func startClosing(_ context: ChannelHandlerContext) {
        closing = true
        armIdleTimer(context) // when none is armed; the one armed closes a closing connection when it fires
    }

    private func armIdleTimer(_ context: ChannelHandlerContext) {
        guard idleTimer == nil else { return }
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        idleTimer = context.eventLoop.scheduleTask(deadline: lastActive + idleTimeout) {
            let (context, front) = bound.value
            front.idleTimer = nil
            guard !front.handedOff else { return }
            // A request waiting for its image's check is answered within the check's patience.
            if front.waiting != nil {
                front.lastActive = .now()
                return front.armIdleTimer(context)
            }
            if front.closing || NIODeadline.now() - front.lastActive >= front.idleTimeout {
                front.closing = true
                context.close(promise: nil)
            } else {
                front.armIdleTimer(context)
            }
        }
    }
}
