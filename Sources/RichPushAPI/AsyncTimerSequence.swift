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

/// A sequence that yields every `interval` until cancelled.
package struct AsyncTimerSequence: AsyncSequence {
    package typealias Element = Void
    let interval: Duration

    package static func repeating(every interval: Duration) -> Self { .init(interval: interval) }

    package struct AsyncIterator: AsyncIteratorProtocol {
        let interval: Duration
        package mutating func next() async -> Void? {
            do {
                try await Task.sleep(for: interval)
                return ()
            } catch {
                return nil
            }
        }
    }

    package func makeAsyncIterator() -> AsyncIterator { AsyncIterator(interval: interval) }
}
