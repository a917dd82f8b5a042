import Foundation

/// Launches a campaign, the one way both the HTTP API and `richpush send` do it: records it
/// (`CampaignStore.create`, with its limits and checks), queues an unscheduled one's first
/// batches before answering, counts what is queued, and hands the rest to a background queuer
/// when there is one. A scheduled campaign is only recorded: `CampaignStore.runDue` sends it.
public struct CampaignLauncher: Sendable {
    /// What a launch made.
    public struct Launch: Sendable {
        /// The campaign as recorded.
        public var campaign: Campaign
        /// The campaign as its first batches left it (its recipients and devices queued so far);
        /// nil when it is scheduled, and nothing was queued.
        public var queued: Campaign?
        /// Its counts once the first batches were queued; nil when the campaign is gone by then.
        public var progress: CampaignProgress?
        /// Whether the rest of its recipients was handed to `handOff` to queue.
        public var handedOff: Bool
    }

    /// How a launch ended.
    public enum Outcome: Sendable {
        /// A new campaign, recorded and (unless scheduled) queued or handed over.
        case launched(Launch)
        /// Its `IdempotencyKey` was seen before: nothing was made, and the caller answers with
        /// the first request's campaign (`IdempotentReplay.resource`, or, when nil,
        /// `IdempotencyStore.resource` once the concurrent request has committed).
        case replayed(IdempotentReplay)
    }

    /// Where campaigns are recorded and queued.
    public let campaigns: CampaignStore
    /// How the queued notifications address their pushes (the dispatcher's).
    public let addressing: DeliveryAddressing
    /// Batches queued before `launch` returns; nil for every batch.
    public let maxBatches: Int?
    /// Takes over a campaign whose first batches did not queue everyone (the server's background
    /// queuer, which keeps its queueing just ahead of the sends).
    public let handOff: (@Sendable (Int64) -> Void)?
    /// Called after each batch is committed (to wake the dispatcher).
    public let outboxChanged: @Sendable () -> Void

    /// A launcher over `campaigns`. With `maxBatches`, a campaign larger than that many batches
    /// is handed to `handOff` after them, so `handOff` is required then: a campaign left
    /// half-queued would otherwise wait for its lease to lapse. Without, every recipient is
    /// queued before `launch` returns.
    public init(campaigns: CampaignStore, addressing: DeliveryAddressing, maxBatches: Int? = nil,
                handOff: (@Sendable (Int64) -> Void)? = nil, outboxChanged: @escaping @Sendable () -> Void = {}) {
        precondition(maxBatches == nil || handOff != nil, "with maxBatches, handOff takes the rest of a campaign")
        precondition(maxBatches.map { $0 > 0 } ?? true, "maxBatches must be positive")
        self.campaigns = campaigns
        self.addressing = addressing
        self.maxBatches = maxBatches
        self.handOff = handOff
        self.outboxChanged = outboxChanged
    }

    /// Records `draft` as a campaign by `creator`; unless it is scheduled, queues its first
    /// batches (or all of them), counts its progress, and hands the rest over. `created` is
    /// called once the campaign is recorded, before anything is queued (`richpush send` prints
    /// its id then). With `idempotency`, a key seen before answers `.replayed` and makes nothing.
    /// `audit` is recorded with the campaign, in the transaction that creates it.
    ///
    /// The progress is counted before the rest is handed over, and the rest is handed over
    /// whatever the count does (a campaign left leased here would wait for its lease to lapse):
    /// a count that failed is thrown after the hand-off.
    public func launch(_ draft: CampaignDraft, by creator: String, idempotency: IdempotencyKey? = nil, audit: AuditActor? = nil,
                       created: (Campaign) -> Void = { _ in }) async throws -> Outcome {
        let campaign: Campaign
        do {
            campaign = try await campaigns.create(draft, by: creator, idempotency: idempotency, audit: audit)
        } catch let replay as IdempotentReplay {
            return .replayed(replay)
        }
        created(campaign)
        guard campaign.schedule == nil else {
            let progress = try await campaigns.progress(campaign.id)
            return .launched(Launch(campaign: campaign, queued: nil, progress: progress, handedOff: false))
        }
        let queued = try await campaigns.queue(campaign.id, addressing: addressing, maxBatches: maxBatches ?? .max, batchQueued: outboxChanged)
        let handOff: (@Sendable (Int64) -> Void)? = queued.queued ? nil : self.handOff
        let counted: Result<CampaignProgress?, any Error>
        do { counted = .success(try await campaigns.progress(campaign.id)) } catch { counted = .failure(error) }
        handOff?(campaign.id)
        let progress = try counted.get()
        return .launched(Launch(campaign: campaign, queued: queued, progress: progress, handedOff: handOff != nil))
    }
}
