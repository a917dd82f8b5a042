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

/// What `Authenticator.authenticate` reserves an attempt with, for the request's user and address.
struct LoginAdmission: Sendable {
    let throttle: LoginThrottle
    let user: String?
    let address: String?

    func reserve() throws -> LoginReservation {
        try throttle.reserve(user: user, address: address)
    }

    /// Throws 429 while the user or address is over its limit (no slot is taken).
    func refuseWhileThrottled() throws {
        if let wait = throttle.wait(user: user, address: address) { throw LoginThrottle.throttled(wait: wait) }
    }

    /// Counts a failure that took no reservation.
    func recordFailure() {
        throttle.recordFailure(user: user, address: address)
    }
}
