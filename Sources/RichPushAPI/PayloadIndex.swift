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

/// Notifications by id, with the two things a payload fetch needs: the recipient and the
/// payload, and whether its read mark is already taken care of. Ids are never reused; a
/// payload changes only by a change (`PATCH`), which removes the entry.
///
/// What is read from the database is stored only if nothing was removed since the read began
/// (`mark`, then `load` or `set` with it): a read made before a change committed, stored after
/// the change removed the entry, would serve the old image. A read skipped costs a miss, and a
/// miss reads the database.
///
/// Filled as notifications are made here (a campaign's batches, `POST /api/notifications`) and
/// as they are fetched, so a device's first fetch with a session finds its notification
/// without a database read. Bounded: two generations of at most `capacity / 2` entries each,
/// the older dropped whole when the newer fills. Cleared when a user is removed (their
/// notifications are deleted, and the name may be taken again).
package final class PayloadIndex: Sendable {
    struct Entry: Sendable {
        var recipient: String
        var payload: MediaID
        /// Its read mark is committed or queued.
        var read: Bool
    }
    private struct Generations {
        var current: [Int64: Entry] = [:]
        var previous: [Int64: Entry] = [:]
        /// Removals so far: a read that began before one is not stored.
        var removals: UInt64 = 0

        subscript(id: Int64) -> Entry? { current[id] ?? previous[id] }

        /// Stores `entry` in the newer generation, which becomes the older one when it is full.
        mutating func insert(_ id: Int64, _ entry: Entry, half: Int) {
            if current.count >= half, current[id] == nil {
                previous = current
                current = [:]
            }
            current[id] = entry
        }
    }
    private let generations = NIOLockedValueBox(Generations())
    private let half: Int

    package init(capacity: Int = 200_000) {
        half = max(1, capacity / 2)
    }

    func get(_ id: Int64) -> Entry? {
        generations.withLockedValue { $0[id] }
    }

    /// Where removals stand: take it before a read whose rows are then stored with `since`.
    func mark() -> UInt64 {
        generations.withLockedValue { $0.removals }
    }

    /// Stores `entry`, read after `mark` was taken, unless something was removed since.
    func set(_ id: Int64, _ entry: Entry, since mark: UInt64) {
        generations.withLockedValue { g in
            guard g.removals == mark else { return }
            g.insert(id, entry, half: half)
        }
    }

    /// Records notifications just made (unread): committed this instant, nothing changed them yet.
    package func made(_ notifications: [QueuedNotification]) {
        let ids = notifications.map(\.id).sorted()
        generations.withLockedValue { g in
            for n in notifications { g.insert(n.id, Entry(recipient: n.recipient, payload: n.payload, read: false), half: half) }
        }
        madeHere.withLockedValue { $0.add(ids) }
    }

    /// The ids made here (`made`) that the follower has not passed yet, as ranges.
    struct MadeHere {
        /// Sorted, disjoint and not adjacent.
        private(set) var ranges: [ClosedRange<Int64>] = []
        /// Ranges kept at most: past it the lowest are forgotten (the follower then reads them, as it would without).
        static let limit = 256

        mutating func add(_ sorted: [Int64]) {
            var start = 0
            while start < sorted.count {
                var end = start
                while end + 1 < sorted.count, sorted[end + 1] <= sorted[end] &+ 1 { end += 1 }
                insert(sorted[start]...sorted[end])
                start = end + 1
            }
            if ranges.count > Self.limit { ranges.removeFirst(ranges.count - Self.limit) }
        }

        private mutating func insert(_ range: ClosedRange<Int64>) {
            var merged = range
            var kept: [ClosedRange<Int64>] = []
            kept.reserveCapacity(ranges.count + 1)
            for r in ranges {
                if r.upperBound &+ 1 < merged.lowerBound || merged.upperBound &+ 1 < r.lowerBound {
                    kept.append(r)
                } else {
                    merged = min(r.lowerBound, merged.lowerBound)...max(r.upperBound, merged.upperBound)
                }
            }
            let at = kept.firstIndex { $0.lowerBound > merged.lowerBound } ?? kept.endIndex
            kept.insert(merged, at: at)
            ranges = kept
        }

        /// `last` moved past the ids made here that follow it without a gap (they are indexed
        /// already); ranges it passes are forgotten.
        mutating func skip(after last: Int64) -> Int64 {
            var last = last
            while let first = ranges.first, first.lowerBound <= last &+ 1 {
                last = max(last, first.upperBound)
                ranges.removeFirst()
            }
            return last
        }
    }
    private let madeHere = NIOLockedValueBox(MadeHere())

    /// Where the follower reads on from when it has read up to `last`: past the notifications
    /// made here that follow `last` with no id between (docs/design/fast-path.md: a campaign's
    /// notifications are indexed as they are made, and its node need not read them back).
    func followAfter(_ last: Int64) -> Int64 {
        madeHere.withLockedValue { $0.skip(after: last) }
    }

    /// Marks `id` read here; true if it was not yet (then the caller queues its read mark).
    func markRead(_ id: Int64) -> Bool {
        generations.withLockedValue { g in
            guard var entry = g[id], !entry.read else { return false }
            entry.read = true
            g.insert(id, entry, half: half)
            return true
        }
    }

    /// Records notifications read from the database after `mark` was taken, keeping what is
    /// known here already; none if something was removed since.
    func load(_ entries: [(notification: QueuedNotification, read: Bool)], since mark: UInt64) {
        generations.withLockedValue { g in
            guard g.removals == mark else { return }
            for (n, read) in entries where g[n.id] == nil {
                g.insert(n.id, Entry(recipient: n.recipient, payload: n.payload, read: read), half: half)
            }
        }
    }

    package func removeAll() {
        generations.withLockedValue { $0 = Generations(removals: $0.removals &+ 1) }
    }

    /// Forgets notifications that were removed (withdrawn, or their recipient removed).
    func remove(_ ids: [Int64]) {
        guard !ids.isEmpty else { return }
        generations.withLockedValue { g in
            g.removals &+= 1
            for id in ids {
                g.current[id] = nil
                g.previous[id] = nil
            }
        }
    }

    /// Entries kept at most.
    var capacity: Int { 2 * half }

    var count: Int { generations.withLockedValue { $0.current.count + $0.previous.count } }
}

#if canImport(Glibc)
import Glibc
#endif
