import Foundation
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

@Suite("A campaign's first attempts as runs of pushes on PostgreSQL: claimed a run at a time, recorded as bits, spilled into rows of their own when not sent",
       .enabled(if: StoreEngine.all.contains(.shared)))
struct OutboxRunsCoreTests {
    /// Campaign `id`'s runs, by id: size, pushes left, state, lease tag, and the places settled and sent.
    static func runs(_ store: DataStore, campaign id: Int64) async throws -> [Int64: (size: Int, remaining: Int, state: String, tag: Int64?, settled: Set<Int>, sent: Set<Int>)] {
        try await store.database.read { db in
            var runs: [Int64: (size: Int, remaining: Int, state: String, tag: Int64?, settled: Set<Int>, sent: Set<Int>)] = [:]
            for row in try db.fetchAll(sql: """
                SELECT id, size, remaining, state, leaseTag, settled::text AS settled, sent::text AS sent FROM outbox_runs WHERE campaignId = ?
                """, arguments: [id]) {
                func places(_ bits: String) -> Set<Int> { Set(Array(bits.utf8).indices.filter { Array(bits.utf8)[$0] == UInt8(ascii: "1") }) }
                runs[row["id"]] = (row["size"], row["remaining"], row["state"], row["leaseTag"], places(row["settled"]), places(row["sent"]))
            }
            return runs
        }
    }

    @Test("450 devices are three runs (200, 200, 50) and no rows; a claim takes a run and leases it; sent, failed and retried pushes set their bits, the last two with rows of their own; a run with nothing left is done; a lapsed lease's pushes go to the next holder, and the late outcome is lease_lost; a retiring holder gives its run back")
    func runsClaimedAndRecorded() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 450)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        let holder = OutboxHolder(pid: 1), other = OutboxHolder(pid: 2)
        try await store.outbox.heartbeat(holder: holder)
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        var runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs.values.map(\.size).sorted() == [50, 200, 200])
        #expect(runs.values.allSatisfy { $0.state == "pending" && $0.remaining == $0.size && $0.settled.isEmpty && $0.tag == nil })
        let rowsQueued = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ?", arguments: [campaign.id]) }
        #expect(rowsQueued == 0)
        // A run's arrays are compressed with lz4 (migration core-v32), not pglz, and read back whole.
        let compression = try await store.database.read { db in
            try db.fetchAll(sql: """
                SELECT pg_column_compression(targets) AS targets, pg_column_compression(registrationIds) AS registrations,
                       pg_column_compression(pushIds) AS pushes
                FROM outbox_runs WHERE campaignId = ? AND size = 200
                """, arguments: [campaign.id]).map { [$0["targets"] as String?, $0["registrations"], $0["pushes"]] }
        }
        #expect(compression == [["lz4", "lz4", "lz4"], ["lz4", "lz4", "lz4"]])

        // A claim of 200 takes the first run whole.
        let first = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(first.count == 200 && first.allSatisfy { $0.id < 0 && $0.campaignId == campaign.id && $0.content?.message == "hi" && $0.recipient != nil })
        #expect(Set(first.map(\.pushId)).count == 200 && Set(first.map(\.target)).count == 200)
        let run = OutboxRuns.place(of: first[0].id).run
        #expect(first.allSatisfy { OutboxRuns.place(of: $0.id).run == run })
        runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs[run]?.tag == holder.tag)

        // 197 sent, one failed, one retried, one still in flight.
        let failed = first[0], retried = first[1], inFlight = first[2]
        var results: [(DeliveryJob, OutboxResult)] = first.dropFirst(3).map { ($0, .sent) }
        results.append((failed, .failed(reason: "BadDeviceToken", prune: false, deadSince: nil)))
        results.append((retried, .retry(reason: "TooManyRequests", at: Date().addingTimeInterval(3600))))
        let labels = try await store.outbox.record(results, holder: holder)
        #expect(labels.filter { $0 == "sent" }.count == 197 && labels.suffix(2) == ["failed", "retried"])
        runs = try await Self.runs(store, campaign: campaign.id)
        let place = { (job: DeliveryJob) in OutboxRuns.place(of: job.id).index }
        #expect(runs[run]?.remaining == 1 && runs[run]?.state == "pending")
        #expect(runs[run]?.sent == Set(first.dropFirst(3).map(place)))
        #expect(runs[run]?.settled == Set(first.dropFirst(3).map(place) + [place(failed), place(retried)]))
        let spilled = try await store.database.read { db in
            try db.fetchAll(sql: "SELECT pushId, state, reason, attempts, nextAttemptAt > ? AS later FROM deliveries WHERE campaignId = ? ORDER BY state",
                            arguments: [db.now + 3000, campaign.id])
        }
        #expect(spilled.map { $0["pushId"] as String } == [failed.pushId, retried.pushId])
        #expect(spilled.map { $0["state"] as String } == ["failed", "pending"])
        #expect(spilled.map { $0["reason"] as String } == ["BadDeviceToken", "TooManyRequests"])
        #expect(spilled.allSatisfy { $0["attempts"] as Int == 1 } && spilled[1]["later"] as Bool == true)

        // Recording the same outcomes again changes nothing and counts as lease_lost.
        #expect(try await store.outbox.record(Array(results.prefix(3)), holder: holder) == ["lease_lost", "lease_lost", "lease_lost"])

        // The lease lapses: the other holder gets the one push left (and the next run), the late
        // outcome is lease_lost.
        try await store.database.write { db in try db.execute(sql: "UPDATE outbox_runs SET leaseUntil = ? WHERE id = ?", arguments: [db.now - 1, run]) }
        let second = try await store.outbox.claim(limit: 200, lease: 300, holder: other)
        #expect(second.first?.id == inFlight.id && second.first?.pushId == inFlight.pushId)
        #expect(try await store.outbox.record([(inFlight, .sent)], holder: holder) == ["lease_lost"])
        #expect(try await store.outbox.record([(second[0], .sent)], holder: other) == ["sent"])
        runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs[run]?.state == "done" && runs[run]?.remaining == 0 && runs[run]?.tag == nil && runs[run]?.sent.count == 198)

        // The other holder retires: its runs are due again, unleased, with their bits kept.
        try await store.outbox.retire(holder: other)
        runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs.values.allSatisfy { $0.tag == nil })
        var rest = try await store.outbox.claim(limit: 1000, lease: 300, holder: holder)
        #expect(rest.count == 250 && Set(rest.map(\.id)).count == 250)
        #expect(try await store.outbox.record(rest.map { ($0, .sent) }, holder: holder).allSatisfy { $0 == "sent" })
        rest = try await store.outbox.claim(limit: 1000, lease: 300, holder: holder)
        #expect(rest.isEmpty)
        runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs.values.allSatisfy { $0.state == "done" && $0.remaining == 0 })
        #expect(runs.values.map(\.sent.count).reduce(0, +) == 448)
    }

    @Test("cancelling drops the pushes of runs no live lease holds (their recipients lose the inbox entry), and the leased run finishes; the campaign's counts follow")
    func cancelDropsRuns() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 450)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        let holder = OutboxHolder(pid: 1)
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let inFlight = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(inFlight.count == 200)
        let progress = try await campaigns.cancel(campaign.id)
        #expect(progress.pending == 200 && progress.campaign.devices == 200 && progress.campaign.recipients == 200)
        #expect(try await store.outbox.claim(limit: 1000, lease: 300, holder: holder).isEmpty)
        let left = try await store.database.read { db in
            try Set(Int64.fetchAll(db, sql: "SELECT id FROM notifications WHERE campaignId = ?", arguments: [campaign.id]))
        }
        #expect(left == Set(inFlight.map(\.notificationId)), "only the recipients of the pushes in flight keep their inbox entry")
        let runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs.values.filter { $0.state == "done" }.count == 2 && runs.values.allSatisfy { $0.sent.isEmpty })
        #expect(try await store.outbox.record(inFlight.map { ($0, .sent) }, holder: holder).allSatisfy { $0 == "sent" })
        let after = try #require(try await campaigns.progress(campaign.id))
        #expect(after.pending == 0 && after.sent == 200 && after.campaign.devices == 200)
    }

    @Test("a token gone (410) removes its registration, and its pushes waiting in another campaign's run fail with it: settled, not sent, with a row of their own")
    func goneTokenFailsRunPushes() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 3)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let first = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "one", mode: .alert)), by: "root")
        _ = try await campaigns.queue(first.id, addressing: .perDevice)
        let second = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "two", mode: .alert)), by: "root")
        _ = try await campaigns.queue(second.id, addressing: .perDevice)
        let holder = OutboxHolder(pid: 1)
        // A claim of three takes the first run only (the second starts after three pushes).
        let claimed = try await store.outbox.claim(limit: 3, lease: 300, holder: holder)
        #expect(claimed.count == 3 && claimed.allSatisfy { $0.campaignId == first.id })
        let gone = claimed[0]
        let labels = try await store.outbox.record([(gone, .failed(reason: "Unregistered", prune: true, deadSince: nil))], holder: holder)
        #expect(labels == ["failed"])
        let registrations = try await store.database.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM registrations WHERE id = ?", arguments: [gone.registrationId])
        }
        #expect(registrations == 0)
        let runs = try await Self.runs(store, campaign: second.id)
        let run = try #require(runs.values.first)
        #expect(run.remaining == 2 && run.settled.count == 1 && run.sent.isEmpty)
        let failed = try await store.database.read { db in
            try db.fetchAll(sql: "SELECT target, state, reason FROM deliveries WHERE campaignId = ?", arguments: [second.id])
        }
        #expect(failed.count == 1 && failed.first?["target"] as String? == gone.target && failed.first?["state"] as String? == "failed")
        #expect((failed.first?["reason"] as String?)?.hasPrefix("device registration removed after Unregistered") == true)
        let rest = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(rest.count == 2 && rest.allSatisfy { $0.campaignId == second.id && $0.target != gone.target })
    }

    @Test("a user removed mid-campaign: their push waiting in a run is dropped and leaves the campaign's pushes queued, their token and registration are blanked in every run, and the run still ends")
    func removedUserLeavesRuns() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 3)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let holder = OutboxHolder(pid: 1)
        let before = try #require(try await campaigns.progress(campaign.id))
        #expect(before.pending == 3)
        let token = try await store.database.read { db in
            try String.fetchOne(db, sql: "SELECT handle FROM registrations WHERE username = 'user02'")
        }
        try await store.users(cost: 4).remove(name: "user02")
        let runs = try await Self.runs(store, campaign: campaign.id)
        #expect(runs.values.first?.remaining == 2 && runs.values.first?.settled.count == 1 && runs.values.first?.sent.isEmpty == true)
        let arrays = try await store.database.read { db in
            try db.fetchOne(sql: "SELECT array_to_string(targets, ',') AS t, array_to_string(registrationIds, ',') AS r FROM outbox_runs WHERE campaignId = ?",
                            arguments: [campaign.id])
        }
        let targets = (arrays?["t"] as String?)?.split(separator: ",", omittingEmptySubsequences: false).map(String.init) ?? []
        let removedToken = try #require(token)
        #expect(targets.count == 3 && targets.filter(\.isEmpty).count == 1 && !targets.contains(removedToken))
        #expect((arrays?["r"] as String?)?.split(separator: ",", omittingEmptySubsequences: false).filter(\.isEmpty).count == 1)
        let after = try #require(try await campaigns.progress(campaign.id))
        #expect(after.pending == 2)
        let claimed = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(claimed.count == 2 && claimed.allSatisfy { $0.recipient != "user02" })
        #expect(try await store.outbox.record(claimed.map { ($0, .sent) }, holder: holder) == ["sent", "sent"])
        #expect(try await Self.runs(store, campaign: campaign.id).values.first?.state == "done")
    }

    @Test("taking a campaign back reads its runs: pushes waiting in runs are dropped, each device sent from a run gets a retraction")
    func retractReadsRuns() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 450)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        let holder = OutboxHolder(pid: 1)
        let sent = try await store.outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(try await store.outbox.record(sent.map { ($0, .sent) }, holder: holder).allSatisfy { $0 == "sent" })
        let (_, outcome) = try await campaigns.retract(campaign.id)
        #expect(outcome.cancelled == 250)
        #expect(outcome.retractPushes.values.reduce(0, +) == 200)
        let retractions = try await store.database.read { db in
            try Set(String.fetchAll(db, sql: "SELECT target FROM deliveries WHERE kind = 'retract' AND campaignId = ?", arguments: [campaign.id]))
        }
        #expect(retractions == Set(sent.map(\.target)))
        #expect(try await Self.runs(store, campaign: campaign.id).values.allSatisfy { $0.state == "done" })
    }

    @Test("with a frequency cap and quiet hours, a claim spills into rows only the run pushes the screen holds back (delayed, dropped, capped), with their delay or failure; the pushes that go stay in their run, which ends once they are recorded")
    func guardrailsSpillOnlyHeld() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 10)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        // user01's own quiet hours delay, user02's drop; a window that covers now in UTC.
        let now = Date().timeIntervalSince1970
        let hour = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: Date(timeIntervalSince1970: now)).hour!
        for (name, mode) in [("user01", QuietHours.Mode.delay), ("user02", .drop)] {
            let window = try QuietHours(from: LocalTime(String(format: "%02d:00", hour)), to: LocalTime(String(format: "%02d:00", (hour + 2) % 24)), mode: mode)
            _ = try await store.users.setPreferences(name, timezone: nil, locale: nil, quietHours: .some(window))
        }
        var outbox = store.outbox
        outbox.guardrails = Guardrails(apps: [AppName.default: AppLimits(frequencyCap: try FrequencyCap("1/24h"))])
        let holder = OutboxHolder(pid: 1)
        let rows = { (campaign: Int64) in
            try await store.database.read { db in
                try db.fetchAll(sql: "SELECT d.state, d.reason, d.attempts, d.nextAttemptAt > ? AS later, n.recipient FROM deliveries d JOIN notifications n ON n.id = d.notificationId WHERE d.campaignId = ? ORDER BY n.recipient",
                                arguments: [db.now + 1, campaign])
            }
        }

        // The first campaign: eight go from their run, user01's is delayed and user02's dropped, each in a row of its own.
        let first = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "one", mode: .alert)), by: "root")
        _ = try await campaigns.queue(first.id, addressing: .perDevice)
        let going = try await outbox.claim(limit: 200, lease: 300, holder: holder)
        #expect(going.count == 8 && going.allSatisfy { $0.id < 0 } && Set(going.compactMap(\.recipient)) == Set((3...10).map { String(format: "user%02d", $0) }))
        let held = try await rows(first.id)
        #expect(held.map { $0["recipient"] as String } == ["user01", "user02"])
        #expect(held[0]["state"] as String == "pending" && held[0]["later"] as Bool == true && held[0]["attempts"] as Int == 0)
        #expect(held[0]["reason"] as String == Guardrails.quietReason)
        #expect(held[1]["state"] as String == "failed" && (held[1]["reason"] as String).hasPrefix("quiet hours: dropped"))
        var run = try #require(try await Self.runs(store, campaign: first.id).values.first)
        #expect(run.size == 10 && run.remaining == 8 && run.settled.count == 2 && run.sent.isEmpty && run.state == "pending")
        #expect(try await outbox.record(going.map { ($0, .sent) }, holder: holder).allSatisfy { $0 == "sent" })
        run = try #require(try await Self.runs(store, campaign: first.id).values.first)
        #expect(run.state == "done" && run.remaining == 0 && run.sent.count == 8)
        let firstStats = try #require(try await campaigns.stats(first.id))
        #expect(firstStats.totals.sent == 8 && firstStats.totals.delayed == 1 && firstStats.totals.failed == 1)

        // The second, within the day: the eight are over their cap of one, so nothing goes; every push is a row, and the run is done.
        let second = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "two", mode: .alert)), by: "root")
        _ = try await campaigns.queue(second.id, addressing: .perDevice)
        #expect(try await outbox.claim(limit: 200, lease: 300, holder: holder).isEmpty)
        let after = try await rows(second.id)
        #expect(after.count == 10 && after.filter { $0["state"] as String == "failed" }.count == 9)
        #expect(after.filter { ($0["reason"] as String).hasPrefix("capped: over app default's frequency cap") }.count == 8)
        run = try #require(try await Self.runs(store, campaign: second.id).values.first)
        #expect(run.state == "done" && run.remaining == 0 && run.settled.count == 10 && run.sent.isEmpty)
        let secondStats = try #require(try await campaigns.stats(second.id))
        #expect(secondStats.totals.capped == 8 && secondStats.totals.sent == 0)
    }

    @Test("while a holder from before runs is alive, a campaign is queued as rows")
    func olderHolderGetsRows() async throws {
        let (dir, store, campaigns) = try await ClaimCoreTests.store(.shared, users: 5)
        defer { store.close(); try? FileManager.default.removeItem(at: dir) }
        try await store.database.write { db in
            try db.execute(sql: "INSERT INTO outbox_holders (tag, pid, host, seenAt, outboxVersion) VALUES (5, 5, 'old', ?, 2)", arguments: [db.now])
        }
        let campaign = try await campaigns.create(CampaignDraft(audience: .all, content: NotificationDraft(message: "hi", mode: .alert)), by: "root")
        _ = try await campaigns.queue(campaign.id, addressing: .perDevice)
        #expect(try await Self.runs(store, campaign: campaign.id).isEmpty)
        let rows = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE campaignId = ?", arguments: [campaign.id]) }
        #expect(rows == 5)
    }
}
