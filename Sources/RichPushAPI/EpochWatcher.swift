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

/// Every `interval`: notices removed users and revoked sessions (from any process), and a
/// rotated payload key.
package struct EpochWatcher: Service {
    let authenticator: Authenticator
    let users: UserStore
    let payloadKey: PayloadKey?
    let interval: Duration
    let logger: Logger

    package func run() async throws {
        for await _ in AsyncTimerSequence.repeating(every: interval).cancelOnGracefulShutdown() {
            await check()
        }
    }

    /// Reads the epochs and the payload key once.
    func check() async {
        do {
            authenticator.observe(epochs: try await users.epochs())
            _ = try await payloadKey?.reloadIfChanged()
        } catch {
            logger.warning("cannot read the users epoch or the payload key", metadata: ["error": "\(error)"])
        }
    }
}
