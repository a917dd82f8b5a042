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

/// Writes when API keys were last used (docs/api.md#apps-and-api-keys): every few seconds one batch, not a write per
/// request, and a last one at shutdown.
package struct KeyUseRecorder: Service {
    /// Made of its parts, named.
    package init(authenticator: Authenticator) {
        self.authenticator = authenticator
    }

    let authenticator: Authenticator
    var interval: Duration = .seconds(2)

    package func run() async throws {
        // Cancelled, its sleep returns at once: the loop ends rather than spin.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            await authenticator.recordKeyUses()
        }
    }
}
