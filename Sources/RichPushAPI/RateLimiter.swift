import Foundation
import NIOConcurrencyHelpers

/// A token bucket per key (a user name): `perMinute` tokens a minute, at most `perMinute` at
/// once, so a burst of a minute's worth passes and a steady stream is held to the rate.
///
/// `POST /api/notifications` takes one token of its caller: each notification fans out to
/// every device of the user (up to 100), and without a limit one account could fill the outbox
/// faster than it drains, so that every other user's pushes wait behind it. The table is
/// bounded: full buckets carry no information and are dropped first.
final class RateLimiter: Sendable {
    /// Tokens a minute per key; 0 turns the limit off.
    let perMinute: Int
    private static let capacity = 100_000
    private struct Bucket {
        var tokens: Double
        var at: Double
    }
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    /// A limiter of `perMinute` a minute per key (0: no limit).
    init(perMinute: Int) {
        self.perMinute = perMinute
    }

    /// Takes one token of `key`; nil when taken, else the whole seconds until one is there.
    func take(_ key: String, now: Double = Date().timeIntervalSince1970) -> Int? {
        guard perMinute > 0 else { return nil }
        let rate = Double(perMinute) / 60, burst = Double(perMinute)
        return buckets.withLockedValue { buckets in
            if buckets.count >= Self.capacity {
                buckets = buckets.filter { min(burst, $0.value.tokens + (now - $0.value.at) * rate) < burst }
                if buckets.count >= Self.capacity { buckets.removeAll() }
            }
            var bucket = buckets[key] ?? Bucket(tokens: burst, at: now)
            bucket.tokens = min(burst, bucket.tokens + max(0, now - bucket.at) * rate)
            bucket.at = now
            defer { buckets[key] = bucket }
            guard bucket.tokens >= 1 else {
                return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
            }
            bucket.tokens -= 1
            return nil
        }
    }
}
