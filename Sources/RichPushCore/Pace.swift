import Foundation

/// The send times of a paced campaign's pushes (docs/api.md#options-badges-and-paced-sends): one every `step` seconds from `start`,
/// handed out in the order the pushes are queued, so every node's outbox claims them no faster
/// than the campaign's rate.
final class Pace {
    private(set) var nextAt: Double
    let step: Double

    /// Pushes from `start` (the database's clock), `perMinute` a minute.
    init(start: Double, perMinute: Int) {
        nextAt = start
        step = 60 / Double(max(1, perMinute))
    }

    /// The next push's time.
    func next() -> Double {
        defer { nextAt += step }
        return nextAt
    }
}

