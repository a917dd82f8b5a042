import Foundation
import NIOConcurrencyHelpers
import PushDelivery
import RichPushCore

/// A provider whose sends take `delay` and are counted: a stand-in for a slow push service,
/// to see what the outbox does around its leases.
public final class SlowProvider: PushProvider {
    public let delay: Duration
    public let sends = NIOLockedValueBox(0)
    public init(delay: Duration) { self.delay = delay }
    public var addressing: DeliveryAddressing { .perDevice }
    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        sends.withLockedValue { $0 += 1 }
        try? await Task.sleep(for: delay)
        return (.sent(id: nil), nil)
    }
    public func shutdown() async {}
}

/// Holds pushes until the test opens it, and counts the pushes that reached it (so a test knows
/// a push is in flight without guessing how long that takes on a busy machine).
public final class PushGate: Sendable {
    private let state = NIOLockedValueBox<(open: Bool, waiters: [CheckedContinuation<Void, Never>], arrived: Int)>((false, [], 0))

    public init() {}

    /// Waits until the gate is open (counted as arrived).
    public func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let pass = state.withLockedValue { s -> Bool in
                s.arrived += 1
                if s.open { return true }
                s.waiters.append(continuation)
                return false
            }
            if pass { continuation.resume() }
        }
    }

    /// Lets every waiting push and every later one through.
    public func open() {
        let waiters = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Pushes that reached the gate.
    public var arrived: Int { state.withLockedValue { $0.arrived } }
}

/// A provider answering per device token: after `delays[token]` (default none) and `gates[token]`,
/// with `outcomes[token]` (default sent).
public final class ScriptedProvider: PushProvider {
    public let delays: [String: Duration]
    public let gates: [String: PushGate]
    public let outcomes: [String: DeliveryOutcome]
    public init(delays: [String: Duration] = [:], gates: [String: PushGate] = [:], outcomes: [String: DeliveryOutcome] = [:]) {
        self.delays = delays
        self.gates = gates
        self.outcomes = outcomes
    }
    public var addressing: DeliveryAddressing { .perDevice }
    public func deliver(_ job: DeliveryJob) async -> (DeliveryOutcome, timestamp: Date?) {
        if let delay = delays[job.target] { try? await Task.sleep(for: delay) }
        if let gate = gates[job.target] { await gate.wait() }
        return (outcomes[job.target] ?? .sent(id: nil), nil)
    }
    public func shutdown() async {}
}

