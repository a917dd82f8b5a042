import Logging
import PushDelivery
import RichPushCore
import ServiceLifecycle

/// Queues, in the background, the campaigns that `POST /api/admin/campaigns` started: the
/// request answers once `ahead` recipients are queued (or everyone is), and the rest is queued here
/// no faster than the sends go out (`CampaignStore.queue(ahead:)`), however many devices
/// there are. A million-recipient POST used to hold its connection for the whole 284 s of
/// queueing, with every push meanwhile costing twice its CPU (issue #28).
///
/// Each campaign is leased while it is queued here; at a graceful shutdown its queueing stops
/// between batches and its lease is ended, for `CampaignResumer` (on this node's next start, or
/// another node) to finish it. Campaigns resumed after a process died, and those scheduled
/// at a time, are queued here too (`CampaignResumer` hands them over).
package final class CampaignQueuer: Service, Sendable {
    private let campaigns: CampaignStore
    private let dispatcher: any PushDispatching
    /// How many of a campaign's pushes may wait to be sent before its queueing pauses.
    let ahead: Int
    private let logger: Logger
    private let started: AsyncStream<Int64>
    private let starter: AsyncStream<Int64>.Continuation

    package init(campaigns: CampaignStore, dispatcher: any PushDispatching, ahead: Int, logger: Logger) {
        self.campaigns = campaigns
        self.dispatcher = dispatcher
        // Even without a push service here, another node may be sending (the queueing then
        // goes on at the sends' pace); where none is, queueing stops waiting once it stalls.
        self.ahead = ahead
        self.logger = logger
        (started, starter) = AsyncStream.makeStream(of: Int64.self)
    }

    /// How many batches of recipients a POST queues itself before handing the campaign over:
    /// as many as make `ahead` recipients.
    var firstBatches: Int { max(1, (ahead + campaigns.batchSize - 1) / campaigns.batchSize) }

    /// Queues the rest of campaign `id` in the background; once the queuer has stopped, ends
    /// the campaign's lease instead, for the next start (or another node) to queue it.
    package func finish(_ id: Int64) {
        if case .terminated = starter.yield(id) {
            Task.detached { [campaigns] in try? await campaigns.letLeaseLapse(id) }
        }
    }

    package func run() async throws {
        let dispatcher = self.dispatcher
        await withDiscardingTaskGroup { group in
            for await id in started.cancelOnGracefulShutdown() {
                group.addTask { [campaigns, ahead, logger] in
                    do {
                        // The outbox changes fast while a campaign past its first batches goes out:
                        // the planner's statistics are refreshed now and every 20 s while it is
                        // queued (PostgreSQL; autovacuum's own come a minute late or more). A child
                        // task, so that a refresh under way is awaited before the database closes.
                        try await withThrowingTaskGroup(of: Void.self) { statistics in
                            statistics.addTask {
                                while !Task.isCancelled {
                                    do { try await campaigns.refreshOutboxStatistics() } catch is CancellationError where Task.isCancelled { return } catch {
                                        logger.warning("cannot refresh the outbox's statistics", metadata: ["error": "\(error)"])
                                    }
                                    try? await Task.sleep(for: .seconds(20))
                                }
                            }
                            _ = try await campaigns.queue(id, addressing: dispatcher.addressing, ahead: ahead) { dispatcher.outboxChanged() }
                            statistics.cancelAll() // (when `queue` throws, the group cancels it)
                        }
                    } catch is CancellationError {
                        // Not a cancelled task's write (it could be refused): the lease lapses now,
                        // and the next start (or another node) finishes the campaign within seconds.
                        await Task.detached { try? await campaigns.letLeaseLapse(id) }.value
                        logger.notice("campaign queueing stopped by the shutdown; the next start finishes it", metadata: ["campaign": "\(id)"])
                    } catch {
                        // The lease lapses: CampaignResumer takes the campaign up again.
                        logger.error("cannot queue campaign; it is taken up again when its lease lapses",
                                     metadata: ["campaign": "\(id)", "error": "\(error)"])
                    }
                }
            }
            group.cancelAll()
        }
    }
}
