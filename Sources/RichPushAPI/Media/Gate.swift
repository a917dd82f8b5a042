import NIOConcurrencyHelpers

/// Counts holders up to a limit, and each key's (a user's) up to a share of it; `enter`
/// refuses past either instead of queueing.
final class Gate: Sendable {
    /// Holders at once.
    let limit: Int
    /// Holders one key may be at once: a quarter of the limit, so one user cannot take every slot.
    let perKey: Int
    private struct Counts {
        var total = 0
        var byKey: [String: Int] = [:]
    }
    private let counts = NIOLockedValueBox(Counts())

    init(limit: Int) {
        self.limit = limit
        self.perKey = max(1, limit / 4)
    }

    /// Why a holder was refused.
    enum Refusal: Error { case full, keyFull }

    /// Takes a slot for `key`; throws `.full` when every slot is held, `.keyFull` when the key holds its share.
    func enter(key: String? = nil) throws(Refusal) {
        let refusal = counts.withLockedValue { counts -> Refusal? in
            guard counts.total < limit else { return .full }
            if let key {
                guard counts.byKey[key, default: 0] < perKey else { return .keyFull }
                counts.byKey[key, default: 0] += 1
            }
            counts.total += 1
            return nil
        }
        if let refusal { throw refusal }
    }

    /// Gives back the slot `enter(key:)` took.
    func leave(key: String? = nil) {
        counts.withLockedValue { counts in
            counts.total -= 1
            if let key {
                let left = counts.byKey[key, default: 1] - 1
                counts.byKey[key] = left > 0 ? left : nil
            }
        }
    }
}
