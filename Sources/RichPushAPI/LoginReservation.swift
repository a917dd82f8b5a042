import Crypto
import Foundation
import Hummingbird
import HummingbirdBcrypt
import Logging
import PushDelivery
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushCore
import ServiceLifecycle

/// One sign-in attempt counted by `LoginThrottle` before its work; settled once with its outcome.
final class LoginReservation: Sendable {
    private let throttle: LoginThrottle
    let user: String?
    let address: String?
    /// When it was reserved: the failure timestamp it stands for.
    let at: Double
    private let settled = NIOLockedValueBox(false)

    init(throttle: LoginThrottle, user: String?, address: String?, at: Double) {
        self.throttle = throttle
        self.user = user
        self.address = address
        self.at = at
    }

    /// Settles the attempt: a failure stays counted, a success is given back. Only the first call counts.
    func finish(failed: Bool) {
        let first = settled.withLockedValue { done in
            defer { done = true }
            return !done
        }
        if first { throttle.settle(self, failed: failed) }
    }

    deinit {
        // A verification abandoned without an outcome (its task cancelled) frees its slot; it stays counted.
        if !settled.withLockedValue({ $0 }) { throttle.settle(self, failed: true) }
    }
}
