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
struct AsyncTimerSequence: AsyncSequence {
    typealias Element = Void
    let interval: Duration

    static func repeating(every interval: Duration) -> Self { .init(interval: interval) }

    struct AsyncIterator: AsyncIteratorProtocol {
        let interval: Duration
        mutating func next() async -> Void? {
            do {
                try await Task.sleep(for: interval)
                return ()
            } catch {
                return nil
            }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(interval: interval) }
}
