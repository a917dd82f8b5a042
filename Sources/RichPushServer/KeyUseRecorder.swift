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
struct KeyUseRecorder: Service {
    let authenticator: Authenticator
    var interval: Duration = .seconds(2)

    func run() async throws {
        // Cancelled, its sleep returns at once: the loop ends rather than spin.
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            await authenticator.recordKeyUses()
        }
    }
}
