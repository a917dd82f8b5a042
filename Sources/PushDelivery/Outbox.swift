import Foundation
import Logging
import Telemetry
import Metrics
import NIOConcurrencyHelpers
import RichPushCore
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Delivers the outbox: a `Service` that claims due deliveries, sends them through a provider
/// with many in flight, and records each outcome.
///
/// A claim is a lease (a minute long, with this process's pid and a random tag:
/// docs/design/outbox.md#a-claim-is-a-lease), renewed while the push is in flight, so a second
/// server on the same data directory does not send the same push; leases of dead processes are
/// taken back at start. A push is recorded `sent` only after the service accepted it, and only
/// by the lease's holder. The guarantee is at-least-once: a crash between Apple's acceptance
/// and the record (at most 20 ms of outcomes) sends those pushes again, with the same `apns-id`.
public final class OutboxDispatcher: Service, PushDispatching {
    private let outbox: OutboxStore
    private let provider: any PushProvider
    private let logger: Logger
    private let concurrency: Int
    /// Sends in flight at once to one concurrency group (one Web Push host).
    private let perGroupConcurrency: Int
    private let pollInterval: Duration
    private let maxAttempts: Int
    private let backoffBase: Double
    private let backoffCap: Double
    private let recordBatch = 256
    /// How long a claim is held before others may take it; renewed every third of it while sending.
    private let lease: Double
    /// This dispatcher's claim on rows: only it may record outcomes of the rows it claimed.
    private let holder = OutboxHolder(pid: Int(getpid()))
    private let wake: AsyncStream<Void>.Continuation
    private let wakeups: AsyncStream<Void>
    /// `richpush_push_duration_seconds` of this provider, by outcome: made at the first drain,
    /// once the server has bootstrapped its metrics (a dispatcher is made before that).
    /// Per platform, made on first use.
    private let durations = NIOLockedValueBox<[String: PushDurations]>([:])
    /// `richpush_pushes_total` by outcome and app, made on first use (after the metrics are bootstrapped).
    private let pushCounters = NIOLockedValueBox<[PushCount: Counter]>([:])
    /// `richpush_live_activity_pushes_total` by event, priority and app (docs/operations.md), made on first use.
    private let activityCounters = NIOLockedValueBox<[ActivityPushCount: Counter]>([:])
    /// Runs on each claimed batch before its pushes are sent (`beforeSending`).
    private let preparation = NIOLockedValueBox<(@Sendable ([DeliveryJob]) async -> Void)?>(nil)
    /// The providers failing for a cause a person must mend, as the recorded outcomes show (`/ready`, and the log once per cause).
    public let health: ProviderHealth

    /// Creates a dispatcher. Retries back off exponentially from `backoffBase` seconds, capped,
    /// with jitter; after `maxAttempts` a delivery fails with its last reason.
    ///
    /// `concurrency` is each platform's window (a lane each, so that one slow service cannot
    /// hold another's slots); `perGroupConcurrency` bounds the sends in flight to one host of
    /// a platform whose hosts users choose (Web Push).
    ///
    /// `health` learns from every recorded outcome which providers fail as a whole (a TLS
    /// certificate not trusted, a key or topic refused, nothing listening): their pushes' reason
    /// is the fix, logged once per provider and cause rather than per push.
    public init(outbox: OutboxStore, provider: any PushProvider, logger: Logger, concurrency: Int = 200, perGroupConcurrency: Int = 50,
                pollInterval: Duration = .milliseconds(250), maxAttempts: Int = 12, backoffBase: Double = 1, backoffCap: Double = 300,
                lease: Double = 60, health: ProviderHealth = ProviderHealth()) {
        self.health = health
        self.perGroupConcurrency = perGroupConcurrency
        self.lease = lease
        self.outbox = outbox
        self.provider = provider
        self.logger = logger
        self.concurrency = concurrency
        self.pollInterval = pollInterval
        self.maxAttempts = maxAttempts
        self.backoffBase = backoffBase
        self.backoffCap = backoffCap
        (self.wakeups, self.wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public var addressing: DeliveryAddressing { provider.addressing }

    public var providerHealth: ProviderHealth? { health }

    public func enqueued(_ created: CreatedNotification, logger: Logger) {
        wake.yield()
    }

    public func outboxChanged() {
        wake.yield()
    }

    public func beforeSending(_ prepare: @escaping @Sendable ([DeliveryJob]) async -> Void) {
        preparation.withLockedValue { $0 = prepare }
    }

    public func createChannel(app: String) async throws -> String {
        try await provider.createChannel(app: app)
    }

    public func deleteChannel(_ id: String, app: String) async throws {
        try await provider.deleteChannel(id, app: app)
    }

    public func run() async throws {
        try await outbox.heartbeat(holder: holder)
        try await reclaimDeadLeases(checkingPids: true)
        let pollInterval = self.pollInterval
        let wake = self.wake
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: pollInterval)
                wake.yield()
            }
        }
        defer { ticker.cancel() }
        // Alive, said every few seconds; and the leases of holders that stopped saying so
        // (another node that died) are taken back and sent from here.
        let watcher = Task { [outbox, holder, logger] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(OutboxStore.holderTimeout / 3))
                guard !Task.isCancelled else { return }
                do {
                    try await outbox.heartbeat(holder: holder)
                    try await self.reclaimDeadLeases(checkingPids: false)
                } catch {
                    logger.warning("outbox heartbeat failed", metadata: ["error": "\(error)"])
                }
            }
        }
        defer { watcher.cancel() }
        wake.yield()
        for await _ in wakeups.cancelOnGracefulShutdown() {
            do {
                try await drain()
            } catch {
                logger.error("outbox dispatch failed", metadata: ["error": "\(error)"])
            }
        }
        watcher.cancel()
        do { try await outbox.retire(holder: holder) } catch {
            logger.warning("cannot give back the outbox's leases on stopping; another node takes them back in \(Int(OutboxStore.holderTimeout)) s",
                           metadata: ["error": "\(error)"])
        }
        await provider.shutdown()
    }

    /// Delivers every due push until none is due, as a pipeline: up to `concurrency` sends in
    /// flight at all times, more claimed as slots free up, and outcomes recorded as they arrive,
    /// a commit (one fsync) per `recordBatch` outcomes or per 20 ms, whichever comes first. No
    /// send waits for another batch's stragglers, and a crash loses at most the outcomes of the
    /// last 20 ms (those pushes are sent again: at-least-once).
    func drain() async throws {
        // Leases are renewed while anything is claimed, however long one send takes.
        let renewer = Task { [outbox, lease, holder] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(lease / 3))
                guard !Task.isCancelled else { return }
                try? await outbox.renew(holder: holder, lease: lease)
            }
        }
        defer { renewer.cancel() }
        let window = NIOLockedValueBox(Window())
        let provider = self.provider
        let recordBatch = self.recordBatch
        @Sendable func recordDue(force: Bool) async {
            let batch = window.withLockedValue { w -> [(DeliveryJob, DeliveryOutcome, Date?)] in
                guard !w.outcomes.isEmpty, force || w.outcomes.count >= recordBatch else { return [] }
                defer { w.outcomes.removeAll(keepingCapacity: true) }
                return w.outcomes
            }
            guard !batch.isEmpty else { return }
            do {
                try await record(batch)
            } catch {
                logger.error("cannot record deliveries", metadata: ["count": "\(batch.count)", "error": "\(error)"])
            }
        }
        // Whatever arrived is committed within 20 ms, even while the loop waits on a slow send.
        // Stopped by a flag, not cancellation: a cancelled task's database write could be refused.
        let stopFlusher = NIOLockedValueBox(false)
        let flusher = Task {
            while !stopFlusher.withLockedValue({ $0 }) {
                try? await Task.sleep(for: .milliseconds(20))
                await recordDue(force: true)
            }
        }
        func finish() async {
            stopFlusher.withLockedValue { $0 = true }
            await flusher.value
            await recordDue(force: true)
        }
        // One lane per platform, each with a window of its own: a platform whose service is slow
        // (or a Web Push endpoint that never answers) fills only its own lane's slots.
        let lanes: [Set<String>?] = provider.platforms.map { $0.sorted().map { Set([$0]) } } ?? [nil]
        window.withLockedValue { $0.lanes = lanes.count }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in lanes {
                    group.addTask {
                        try await self.sendAll(lane: lane, window: window, provider: provider, recordDue: recordDue)
                    }
                }
                try await group.waitForAll()
            }
        } catch {
            await finish()
            throw error
        }
        await finish()
    }

    /// The sends in flight (per lane and per concurrency group) and the outcomes not yet
    /// recorded, shared with the providers' callbacks.
    private struct Window {
        /// How many lanes drain runs, and those that found nothing to do at their last look.
        var lanes = 1
        var idle: Set<String> = []
        /// Every lane was idle at one instant: the drain is over.
        var finished = false
        var inFlight: [String: Int] = [:]
        var groups: [String: Int] = [:]
        var outcomes: [(DeliveryJob, DeliveryOutcome, Date?)] = []
    }

    /// The send loop of `drain` for one lane (the rows of `lane`'s platforms, or every row for
    /// nil): keeps the lane's window full, claims as slots free up. Sends are started with a
    /// callback, not a task each: outcomes land in the window from the provider's event loop,
    /// and the loop is woken once for however many arrived meanwhile. A push whose concurrency
    /// group (a Web Push host) has `perGroupConcurrency` in flight waits in the queue while the
    /// others go ahead.
    private func sendAll(lane: Set<String>?, window: NIOLockedValueBox<Window>, provider: any PushProvider,
                         recordDue: @Sendable (Bool) async -> Void) async throws {
        let laneName = lane.map { $0.sorted().joined(separator: ",") } ?? "*"
        let perGroup = self.perGroupConcurrency
        let durationsByPlatform = self.durations
        func durations(_ job: DeliveryJob) -> PushDurations {
            let platform = provider.platform(of: job)
            return durationsByPlatform.value(for: platform) { PushDurations(platform: platform) }
        }
        let (completions, completed) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        // A completion wakes the loop once a quarter of the window is free, not at every one:
        // waking the loop is a thread switch (4% of serve's CPU in a campaign when each push's
        // answer woke it), and three quarters of the window still in flight keep the service busy.
        // Sends of a concurrency group wake it each (its queued pushes wait for that group's room).
        let wakeAt = concurrency - max(1, concurrency / 4)
        var wake = completions.makeAsyncIterator()
        // Claimed and not yet started, oldest first, each with its concurrency group.
        var queue: [(job: DeliveryJob, group: String?)] = []
        // Queued pushes whose group was full at the last look: they do not count as work ready to go.
        var blocked = 0
        var drained = false
        var drainedAt = ContinuousClock.now
        defer { completed.finish() }
        // Sends that never answer must not stop the lane from looking for new rows: it also
        // wakes every 50 ms while it waits.
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(50))
                completed.yield()
            }
        }
        defer { ticker.cancel() }
        do {
            while true {
                // Once every lane was idle at one instant, all of them stop (a lane that stopped
                // alone would leave its rows to wait until the others' slow sends end).
                let finished = window.withLockedValue { w in
                    if !w.finished { w.idle.remove(laneName) }
                    return w.finished
                }
                if finished && queue.isEmpty && window.withLockedValue({ $0.inFlight[laneName, default: 0] }) == 0 { break }
                if Task.isCancelled {
                    // Another lane failed: start nothing more (the queued rows' leases lapse and
                    // they are claimed again), let what is in flight finish, and stop.
                    await Self.waitForSends(of: laneName, in: window)
                    break
                }
                var inFlight = window.withLockedValue { $0.inFlight[laneName, default: 0] }
                let ready = queue.count - blocked
                // Claim while there is room for more than half a window: the claim's commit overlaps the sends in flight.
                // Pushes held back by their group's limit are not counted (with nothing else to send, the room
                // they leave is filled), up to a bound on what one lane holds claimed.
                if !drained && (ready + inFlight <= concurrency / 2 || (ready == 0 && inFlight < concurrency)) && queue.count < 4 * concurrency {
                    let claimed = try await claim(limit: concurrency, platforms: lane)
                    if !claimed.isEmpty, let prepare = preparation.withLockedValue({ $0 }) { await prepare(claimed) }
                    drained = claimed.isEmpty
                    drainedAt = ContinuousClock.now
                    queue.append(contentsOf: claimed.map { ($0, provider.concurrencyGroup(of: $0)) })
                    inFlight = window.withLockedValue { $0.inFlight[laneName, default: 0] }
                }
                var room = concurrency - inFlight
                if room > 0 && !queue.isEmpty {
                    var jobs: [(job: DeliveryJob, group: String?)] = []
                    window.withLockedValue { w in
                        var kept: [(job: DeliveryJob, group: String?)] = []
                        kept.reserveCapacity(queue.count)
                        blocked = 0
                        for entry in queue {
                            if room > 0, entry.group.map({ w.groups[$0, default: 0] < perGroup }) ?? true {
                                if let group = entry.group { w.groups[group, default: 0] += 1 }
                                jobs.append(entry)
                                room -= 1
                            } else {
                                if entry.group != nil && room > 0 { blocked += 1 }
                                kept.append(entry)
                            }
                        }
                        queue = kept
                        w.inFlight[laneName, default: 0] += jobs.count
                    }
                    inFlight += jobs.count
                    for (job, group) in jobs {
                        let started = DispatchTime.now().uptimeNanoseconds
                        let timers = durations(job)
                        let span = Telemetry.isTracing ? Self.pushSpan(job) : nil
                        let finish: @Sendable (DeliveryOutcome, Date?) -> Void = { outcome, timestamp in
                            timers.record(outcome, since: started)
                            if let span { Self.end(span, outcome, job) }
                            let stillInFlight = window.withLockedValue { w in
                                w.inFlight[laneName, default: 0] -= 1
                                if let group {
                                    let left = w.groups[group, default: 1] - 1
                                    w.groups[group] = left > 0 ? left : nil
                                }
                                w.outcomes.append((job, outcome, timestamp))
                                return w.inFlight[laneName, default: 0]
                            }
                            if stillInFlight <= wakeAt || group != nil { completed.yield() }
                        }
                        // A push whose life ended while it waited (a retry, a busy node, its turn in a
                        // paced campaign) is failed here, whatever its platform: never sent late.
                        if job.remainingLife() == nil {
                            finish(.failed(reason: job.expiredReason, prune: false), nil)
                        } else {
                            provider.start(job, completion: finish)
                        }
                    }
                }
                if inFlight == 0 && queue.isEmpty && drained {
                    // Done once every lane is (drain returns when all are, and only then takes the
                    // next wake-up): until then, keep looking for new rows of this lane.
                    let allIdle = window.withLockedValue { w in
                        w.idle.insert(laneName)
                        if w.idle.count >= w.lanes { w.finished = true }
                        return w.finished
                    }
                    if allIdle { break }
                    try? await Task.sleep(for: .milliseconds(20))
                    drained = false
                    continue
                }
                if inFlight > 0 {
                    _ = await wake.next()
                }
                await recordDue(false)
                // New rows may have been queued meanwhile (a campaign queues in batches): look again, at most every 20 ms.
                if drained && ContinuousClock.now - drainedAt > .milliseconds(20) { drained = false }
            }
        } catch {
            // A claim failed: the sends already started still finish, and their outcomes are
            // recorded by `drain` before the error goes up (their rows stay leased meanwhile).
            await Self.waitForSends(of: laneName, in: window)
            throw error
        }
    }

    /// Until `lane` has nothing in flight, polled: in a cancelled task the completion stream and
    /// `Task.sleep` return at once, so this sleeps in a task of its own that cancellation does not reach.
    private static func waitForSends(of lane: String, in window: NIOLockedValueBox<Window>) async {
        await Task {
            while window.withLockedValue({ $0.inFlight[lane, default: 0] }) > 0 {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }.value
    }

    /// docs/operations.md#traces: a push's span, a child of the request that queued it (its
    /// campaign's), with its platform, app, ids and, once answered, its status and `apns-id`.
    private static func pushSpan(_ job: DeliveryJob) -> any Span {
        let platform = job.platform ?? (job.registrationId == nil ? "hub" : "apns")
        let span = InstrumentationSystem.tracer.startSpan("push \(platform)", context: Telemetry.context(traceparent: job.traceparent) ?? .topLevel,
                                                          ofKind: .client)
        span.attributes["push.platform"] = platform
        span.attributes["push.app"] = job.app
        span.attributes["push.id"] = job.pushId
        span.attributes["richpush.notification"] = Int(job.notificationId)
        if let campaign = job.campaignId { span.attributes["richpush.campaign"] = Int(campaign) }
        return span
    }

    private static func end(_ span: any Span, _ outcome: DeliveryOutcome, _ job: DeliveryJob) {
        switch outcome {
        case .sent(let id):
            span.attributes["push.status"] = "sent"
            if (job.platform ?? "apns") == "apns" && job.registrationId != nil { span.attributes["apns.id"] = id ?? job.pushId }
        case .failed(let reason, _):
            span.attributes["push.status"] = "failed"
            span.attributes["push.reason"] = reason
            span.setStatus(SpanStatus(code: .error, message: reason))
        case .retry(let reason, _):
            span.attributes["push.status"] = "retry"
            span.attributes["push.reason"] = reason
        }
        span.end()
    }

    private func claim(limit: Int, platforms: Set<String>?) async throws -> [DeliveryJob] {
        try await outbox.claim(limit: limit, lease: lease, holder: holder, platforms: platforms ?? provider.platforms)
    }

    /// Leases of holders that stopped their heartbeat become due now; with `checkingPids` (once,
    /// at start), on SQLite also those of processes that no longer exist, and of an earlier
    /// process that had this one's pid.
    private func reclaimDeadLeases(checkingPids: Bool) async throws {
        let dead = try await outbox.reclaimDeadLeases(holder: holder, isAlive: checkingPids ? Self.processExists : nil)
        if !dead.isEmpty {
            logger.info("took back deliveries leased by dispatchers that died", metadata: ["holders": "\(dead)"])
            wake.yield()
        }
    }

    /// Whether process `pid` exists (a process we may not signal does).
    @Sendable private static func processExists(_ pid: Int) -> Bool {
        kill(pid_t(pid), 0) == 0 || errno != ESRCH
    }

    private func record(_ outcomes: [(DeliveryJob, DeliveryOutcome, Date?)]) async throws {
        let now = Date()
        let (results, observations) = judge(outcomes)
        health.log(health.observe(observations), to: logger)
        let decided = results.map { job, outcome, timestamp, _ in (job, result(of: outcome, attempts: job.attempts + 1, deadSince: timestamp, now: now)) }
        let labels = try await outbox.record(decided, holder: holder)
        var counts: [PushCount: Int] = [:]
        for (label, (job, _)) in zip(labels, decided) { counts[PushCount(outcome: label, app: job.app), default: 0] += 1 }
        var activityCounts: [ActivityPushCount: Int] = [:]
        for (label, (job, _)) in zip(labels, decided) where label == "sent" {
            if let activity = job.activity {
                activityCounts[ActivityPushCount(event: activity.event, priority: String(activity.priority), app: job.app), default: 0] += 1
            }
        }
        for (key, count) in activityCounts {
            activityCounters.value(for: key) {
                Counter(label: "richpush_live_activity_pushes_total", dimensions: [("event", key.event), ("priority", key.priority), ("app", key.app)])
            }.increment(by: count)
        }
        for (key, count) in counts {
            // Made once per outcome and app: making one looks it up in the registry (a lock and
            // the labels' strings), 0.9% of serve's CPU when made for every batch recorded.
            pushCounters.value(for: key) { Counter(label: "richpush_pushes_total", dimensions: [("outcome", key.outcome), ("app", key.app)]) }
                .increment(by: count)
        }
        // A provider failing as a whole is logged once by `health`, not for each of its pushes.
        for (job, outcome, _, providerFailed) in results where !providerFailed {
            if case .failed(let reason, let prune) = outcome {
                logger.notice("push failed", metadata: ["delivery": "\(job.id)", "reason": "\(reason)", "pruned": "\(prune)"])
            }
        }
    }

    /// The outcomes as they are recorded, and what `health` learns from them. A reason that
    /// means the provider itself fails (`ProviderFailure`: its TLS, credentials, topic or address)
    /// becomes that failure's sentence, which names the fix (flagged `true`); any other reason
    /// loses the library internals it may carry (`ConnectionWords.clean`). Sent pushes are
    /// observed only while a provider is failing (or has just failed in this batch): they are what
    /// ends a failure, and otherwise the common case costs nothing more.
    private func judge(_ outcomes: [(DeliveryJob, DeliveryOutcome, Date?)])
        -> ([(DeliveryJob, DeliveryOutcome, Date?, Bool)], [(platform: String, app: String, observation: ProviderHealth.Observation)]) {
        var watching = health.isFailing
        var observations: [(platform: String, app: String, observation: ProviderHealth.Observation)] = []
        var results: [(DeliveryJob, DeliveryOutcome, Date?, Bool)] = []
        results.reserveCapacity(outcomes.count)
        for (job, outcome, timestamp) in outcomes {
            switch outcome {
            case .sent:
                if watching { observations.append((provider.platform(of: job), job.app, .sent)) }
                results.append((job, outcome, timestamp, false))
            case .failed(let reason, let prune):
                let platform = provider.platform(of: job)
                if let failure = ProviderFailure.classify(platform: platform, app: job.app, reason: reason) {
                    observations.append((platform, job.app, .failed(failure)))
                    watching = true
                    results.append((job, .failed(reason: failure.sentence, prune: prune), timestamp, true))
                } else {
                    results.append((job, .failed(reason: ConnectionWords.clean(reason), prune: prune), timestamp, false))
                }
            case .retry(let reason, let after):
                let platform = provider.platform(of: job)
                if let failure = ProviderFailure.classify(platform: platform, app: job.app, reason: reason) {
                    observations.append((platform, job.app, .failed(failure)))
                    watching = true
                    results.append((job, .retry(reason: failure.sentence, after: after), timestamp, true))
                } else {
                    results.append((job, .retry(reason: ConnectionWords.clean(reason), after: after), timestamp, false))
                }
            }
        }
        return (results, observations)
    }

    /// What a provider's outcome means for the row: a retry past `maxAttempts` fails with its
    /// last reason, others wait `after` (what the service asked) or a backoff.
    private func result(of outcome: DeliveryOutcome, attempts: Int, deadSince: Date?, now: Date) -> OutboxResult {
        switch outcome {
        case .sent:
            return .sent
        case .failed(let reason, let prune):
            return .failed(reason: reason, prune: prune, deadSince: deadSince)
        case .retry(let reason, let after):
            if attempts >= maxAttempts {
                return .failed(reason: "gave up after \(attempts) attempts: \(reason)", prune: false, deadSince: nil)
            }
            return .retry(reason: "retrying: \(reason)", at: now.addingTimeInterval(after ?? backoff(attempt: attempts)))
        }
    }

    /// Capped exponential backoff with full jitter in its upper half.
    func backoff(attempt: Int) -> Double {
        let ceiling = min(backoffCap, backoffBase * pow(2, Double(attempt - 1)))
        return ceiling / 2 + Double.random(in: 0...(ceiling / 2))
    }
}

extension NIOLockedValueBox {
    /// The value kept for `key`, made by `make` (under the lock) the first time it is asked for.
    func value<Key: Hashable, Kept>(for key: Key, make: () -> Kept) -> Kept where Value == [Key: Kept] {
        withLockedValue { kept in
            if let known = kept[key] { return known }
            let made = make()
            kept[key] = made
            return made
        }
    }
}

/// A `richpush_pushes_total` series: an outcome in one app.
private struct PushCount: Hashable {
    var outcome: String
    var app: String
}

/// The labels of `richpush_live_activity_pushes_total`.
private struct ActivityPushCount: Hashable {
    var event: String
    var priority: String
    var app: String
}

/// `richpush_push_duration_seconds` for one platform, a histogram per outcome made once.
struct PushDurations: Sendable {
    let sent: Metrics.Timer
    let failed: Metrics.Timer
    let retried: Metrics.Timer

    init(platform: String) {
        func timer(_ outcome: String) -> Metrics.Timer {
            Metrics.Timer(label: "richpush_push_duration_seconds", dimensions: [("platform", platform), ("outcome", outcome)],
                          preferredDisplayUnit: .seconds)
        }
        sent = timer("sent")
        failed = timer("failed")
        retried = timer("retried")
    }

    func record(_ outcome: DeliveryOutcome, since start: UInt64) {
        let elapsed = Int64(DispatchTime.now().uptimeNanoseconds - start)
        switch outcome {
        case .sent: sent.recordNanoseconds(elapsed)
        case .failed: failed.recordNanoseconds(elapsed)
        case .retry: retried.recordNanoseconds(elapsed)
        }
    }
}
