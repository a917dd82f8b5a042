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

/// On a shared database: acts on what other nodes announce as they commit (PostgreSQL's
/// LISTEN/NOTIFY), so a user removed anywhere is refused here at once and pushes queued anywhere
/// start at once; the pollers stay as the fallback.
package struct ChangeListener: Service {
    /// Made of its parts, named.
    package init(changes: AsyncStream<DataChange>, epochs: EpochWatcher, dispatcher: any PushDispatching) {
        self.changes = changes
        self.epochs = epochs
        self.dispatcher = dispatcher
    }

    let changes: AsyncStream<DataChange>
    /// What a `.users` change makes this node check at once.
    let epochs: EpochWatcher
    let dispatcher: any PushDispatching

    package func run() async throws {
        for await change in changes.cancelOnGracefulShutdown() {
            switch change {
            case .users:
                await epochs.check()
            case .outbox:
                dispatcher.outboxChanged()
            }
        }
    }
}
