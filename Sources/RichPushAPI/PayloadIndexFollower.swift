import Crypto
import CoreMetrics
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import MediaStore
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import RichPushCore
import ServiceLifecycle

/// Keeps a `PayloadIndex` up with the notifications table: the newest at start, then every
/// half second those made since by `richpush send` or another node, whose images it warms
/// (docs/design/fast-path.md: every node has a campaign's image in memory, not only the node
/// that queued it). Those this process made are indexed as they are made: the follower passes
/// over them where no other id came between (`PayloadIndex.followAfter`), and reads them again
/// where one did.
package struct PayloadIndexFollower: Service {
    let index: PayloadIndex
    let notifications: NotificationStore
    let warmer: PayloadWarmer?
    let logger: Logger
    private let last = NIOLockedValueBox<Int64>(0)

    package init(index: PayloadIndex, notifications: NotificationStore, warmer: PayloadWarmer? = nil, logger: Logger) {
        self.index = index
        self.notifications = notifications
        self.warmer = warmer
        self.logger = logger
    }

    /// Loads the newest notifications (up to the index's capacity); call before serving.
    package func start() async throws {
        removedSince.withLockedValue { $0 = nil }
        let since = try await notifications.databaseNow()
        let mark = index.mark()
        let newest = try await notifications.indexEntries(after: nil, limit: index.capacity / 2)
        index.load(newest.entries, since: mark)
        last.withLockedValue { $0 = newest.last ?? 0 }
        removedSince.withLockedValue { $0 = since }
    }

    /// Where the reading of removals goes on from (the database's clock).
    private let removedSince = NIOLockedValueBox<Double?>(nil)
    /// How far back each read of removals looks again: a transaction stamps its removals with
    /// its start, and may commit up to this much later (PostgreSQL; SQLite's are serial).
    static let removalOverlap: Double = 10

    /// Drops from the index what was removed since the last look, on this node or another.
    func followRemovals() async throws {
        guard let since = removedSince.withLockedValue({ $0 }) else { return }
        let (ids, latest) = try await notifications.removals(since: since - Self.removalOverlap)
        index.remove(ids)
        removedSince.withLockedValue { $0 = max(since, latest) }
    }

    package func run() async throws {
        var compacted = ContinuousClock.now
        for await _ in AsyncTimerSequence.repeating(every: .milliseconds(500)).cancelOnGracefulShutdown() {
            do {
                try await followRemovals()
                if ContinuousClock.now - compacted > .seconds(3600) {
                    compacted = .now
                    try await notifications.compactRemovals()
                }
            } catch {
                logger.warning("cannot follow removed notifications", metadata: ["error": "\(error)"])
            }
            do {
                while true {
                    // A batch read across a removal is not stored (its ids are read from the database when fetched).
                    let mark = index.mark()
                    let after = index.followAfter(last.withLockedValue { $0 })
                    last.withLockedValue { $0 = max($0, after) }
                    let (batch, read, full) = try await notifications.indexEntries(after: after, limit: 5_000)
                    index.load(batch, since: mark)
                    if let warmer, !batch.isEmpty { await warmer.warm(Set(batch.map(\.notification.payload))) }
                    if let read { last.withLockedValue { $0 = read } }
                    if !full { break }
                }
            } catch {
                logger.warning("cannot follow new notifications", metadata: ["error": "\(error)"])
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
