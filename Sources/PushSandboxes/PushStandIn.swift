import Foundation
import Hummingbird
import NIOConcurrencyHelpers

/// A local push service: its routes, on a router of their own or beside others'.
public protocol PushStandIn: Sendable {
    /// Adds the service's routes under `prefix`.
    func addRoutes(to router: Router<BasicRequestContext>, at prefix: String)
    /// Where the service is reached, prefix included: the origin of its endpoints and audiences.
    func bound(origin: String)
}

extension PushStandIn {
    /// A router with the service's routes alone.
    public func router() -> Router<BasicRequestContext> {
        let router = Router()
        addRoutes(to: router, at: "")
        return router
    }
}

/// What a stand-in accepted: how many messages, the newest `keep` of them, and one JSON line
/// each for `logLine` (the sandbox commands' `--log`).
public final class AcceptedMessages<Message: Sendable>: Sendable {
    private let state = NIOLockedValueBox((messages: [Message](), count: 0))
    private let keep: Int
    private let logLine: (@Sendable (String) -> Void)?

    /// Keeps the newest `keep` messages; the count keeps going.
    public init(keep: Int, logLine: (@Sendable (String) -> Void)?) {
        self.keep = max(1, keep)
        self.logLine = logLine
    }

    /// Records `message`, and writes `line` (made only when there is a log) as sorted JSON.
    func record(_ message: Message, line: () -> [String: Any]) {
        state.withLockedValue { state in
            state.count += 1
            state.messages.append(message)
            // Trimmed in steps of `keep`, so that each message is moved at most once.
            if state.messages.count >= 2 * keep { state.messages.removeFirst(state.messages.count - keep) }
        }
        if let logLine, let data = try? JSONSerialization.data(withJSONObject: line(), options: [.sortedKeys, .withoutEscapingSlashes]) {
            logLine(String(decoding: data, as: UTF8.self))
        }
    }

    /// The newest `keep` messages, oldest first.
    public var all: [Message] { state.withLockedValue { Array($0.messages.suffix(keep)) } }
    /// How many were accepted.
    public var count: Int { state.withLockedValue { $0.count } }
}
