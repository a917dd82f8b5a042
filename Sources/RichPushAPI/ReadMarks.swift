import Foundation
import Logging
import NIOConcurrencyHelpers
import RichPushCore

/// Records payload fetches as read, many per transaction (group commit): a first fetch costs a
/// share of one commit rather than a commit of its own.
///
/// `mark` waits until its batch is committed; `markSoon` (the event-loop fast path, which must
/// not wait) only queues. Idle, a mark is written at once. Under load a batch starts no sooner
/// than `spacing` after the previous one started, so a fetch storm is written in a few large
/// commits (about 100 a second) rather than one small commit after another: each commit has a
/// fixed cost (a transaction, the counters, a WAL sync, two thread hand-offs) that a profile of
/// 4,500 first fetches a second showed costing more than the rows it wrote.
package final class ReadMarks: Sendable {
    private struct State {
        var pending: [Int64] = []
        var waiters: [CheckedContinuation<Void, any Error>] = []
        var writing = false
        /// Ids committed lately: a payload fetched again is not written again.
        var marked = Set<Int64>()
    }
    private let notifications: NotificationStore
    private let logger: Logger
    private let spacing: Duration
    private let state = NIOLockedValueBox(State())

    /// `spacing`: the least time from one batch's start to the next one's (10 ms: a mark waits
    /// at most that long for its batch to begin).
    package init(notifications: NotificationStore, logger: Logger, spacing: Duration = .milliseconds(10)) {
        self.notifications = notifications
        self.logger = logger
        self.spacing = spacing
    }

    /// Marks `id` read and returns once that is committed.
    func mark(_ id: Int64) async throws {
        if state.withLockedValue({ $0.marked.contains(id) }) { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let start = state.withLockedValue { state in
                state.pending.append(id)
                state.waiters.append(continuation)
                return startWriting(&state)
            }
            if start { Task { await self.drain() } }
        }
    }

    /// Returns once every mark queued before the call is committed: a list read right after a
    /// fetch answered from memory shows that fetch's read mark (read-your-writes on this node).
    func settle() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let queued = state.withLockedValue { state -> Bool in
                guard state.writing else { return false }
                // Resumed with the batch after the one being written (which may be empty).
                state.waiters.append(continuation)
                return true
            }
            if !queued { continuation.resume() }
        }
    }

    /// Queues `id` to be marked read, without waiting.
    func markSoon(_ id: Int64) {
        let start = state.withLockedValue { state in
            guard !state.marked.contains(id) else { return false }
            state.pending.append(id)
            return startWriting(&state)
        }
        if start { Task { await self.drain() } }
    }

    private func startWriting(_ state: inout State) -> Bool {
        guard !state.writing else { return false }
        state.writing = true
        return true
    }

    /// Writes batches until nothing is pending.
    private func drain() async {
        let clock = ContinuousClock()
        var lastStart: ContinuousClock.Instant?
        while true {
            // Under load, let the next batch gather for the rest of `spacing`.
            if let lastStart, clock.now < lastStart + spacing {
                try? await clock.sleep(until: lastStart + spacing)
            }
            lastStart = clock.now
            let (ids, waiters) = state.withLockedValue { state -> ([Int64], [CheckedContinuation<Void, any Error>]) in
                defer { state.pending.removeAll(keepingCapacity: true); state.waiters.removeAll(keepingCapacity: true) }
                if state.pending.isEmpty { state.writing = false }
                return (state.pending, state.waiters)
            }
            if ids.isEmpty {
                for waiter in waiters { waiter.resume() } // `settle` calls: nothing was left to write
                return
            }
            do {
                try await notifications.markRead(ids: ids)
                state.withLockedValue { state in
                    if state.marked.count > 100_000 { state.marked.removeAll() }
                    state.marked.formUnion(ids)
                }
                for waiter in waiters { waiter.resume() }
            } catch {
                logger.error("cannot record payload reads", metadata: ["count": "\(ids.count)", "error": "\(error)"])
                for waiter in waiters { waiter.resume(throwing: error) }
            }
        }
    }
}
