import Synchronization

/// The connections a plain listener has open, raw and adopted, against its limit
/// (`--max-connections`).
final class ConnectionCount: Sendable {
    let limit: Int
    private let value = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Counts a new connection; false at the limit.
    func take() -> Bool {
        var current = value.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = value.compareExchange(expected: current, desired: current + 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// A connection has closed.
    func release() {
        value.subtract(1, ordering: .acquiringAndReleasing)
    }

    /// How many are open now.
    var current: Int { value.load(ordering: .acquiring) }
    /// Fewer than the limit are open.
    var hasRoom: Bool { current < limit }
}
