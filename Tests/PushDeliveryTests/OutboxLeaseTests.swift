import Foundation
import SQLEngine
import Logging
import MediaStore
import NIOConcurrencyHelpers
@testable import PushDelivery
@testable import RichPushCore
import PushTestSupport
import RichPushTestSupport
import ServiceLifecycle
import Testing

@Suite("Outbox leases: renewed while sending, outcomes recorded only by their holder")
struct OutboxLeaseTests {
    /// A data directory with alice, one device and one queued notification; its delivery id.
    func queued() async throws -> (URL, SQLDatabase, Int64) {
        let dir = try Fixtures.tempDirectory()
        let directory = DataDirectory(path: dir.path)
        let database = try CoreDatabase.open(directory)
        _ = try await MediaStore(directory: directory, database: database)
            .ingest(file: Fixtures.media.appendingPathComponent("logo.png").path, name: "logo.png")
        try await UserStore(database: database, cost: 4).add(name: "alice", password: "pw")
        let registrations = RegistrationStore(database: database)
        let r = try await registrations.create(for: "alice")
        _ = try await registrations.update(id: r.id, for: "alice", with: DeviceRegistration(platform: "apns", handle: String(repeating: "ab", count: 32), tags: []))
        let created = try await NotificationStore(database: database).create(for: "alice", draft: NotificationDraft(), defaultImage: "logo.png")
        let id = try #require(try await DeliveryStore(database: database).list(notification: created.notification.id).first?.id)
        return (dir, database, id)
    }

    func dispatcher(_ database: SQLDatabase, _ provider: any PushProvider, lease: Double) -> OutboxDispatcher {
        var logger = Logger(label: "outbox")
        logger.logLevel = .critical
        return OutboxDispatcher(outbox: OutboxStore(database: database), provider: provider, logger: logger, lease: lease)
    }

    @Test("a dispatcher stopped gracefully leaves no holder behind: its row goes, and nothing waits for it to be declared dead")
    func gracefulStopRetires() async throws {
        let (dir, database, _) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        let gate = PushGate()
        let dispatcher = dispatcher(database, ScriptedProvider(gates: [String(repeating: "ab", count: 32): gate]), lease: 60)
        var logger = Logger(label: "group")
        logger.logLevel = .critical
        let group = ServiceGroup(configuration: .init(services: [dispatcher], logger: logger))
        let running = Task { try await group.run() }
        // The push is claimed (leased to this dispatcher) and held at the gate.
        #expect(try await eventually { gate.arrived == 1 })
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox_holders") } == 1)
        await group.triggerGracefulShutdown()
        gate.open()
        try await running.value
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox_holders") } == 0)
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE leaseTag IS NOT NULL") } == 0)
    }

    @Test("a send that outlasts the lease keeps it: a second dispatcher does not send the push again")
    func renewal() async throws {
        let (dir, database, id) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A renewal held up 8 s by a loaded machine (the whole suite runs at once on two cores,
        // browsers included) still keeps the lease: the lease is 12 s, renewed every 4 s, and the
        // send takes 18 s.
        let slow = SlowProvider(delay: .seconds(18)), other = SlowProvider(delay: .zero)
        let first = dispatcher(database, slow, lease: 12)
        let sending = Task { try await first.drain() }
        for _ in 0..<34 { // past the 12 s lease, and more
            try await Task.sleep(for: .milliseconds(500))
            try await dispatcher(database, other, lease: 12).drain()
        }
        try await sending.value
        #expect(slow.sends.withLockedValue { $0 } == 1)
        #expect(other.sends.withLockedValue { $0 } == 0)
        let delivery = try await DeliveryStore(database: database).list(notification: 1).first { $0.id == id }
        #expect(delivery?.state == .sent && delivery?.attempts == 1)
    }

    @Test("an outcome is not recorded over a row whose lease another holder took")
    func holderCheck() async throws {
        let (dir, database, id) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        let slow = SlowProvider(delay: .seconds(1))
        let sending = Task { try await dispatcher(database, slow, lease: 60).drain() }
        #expect(try await eventually { slow.sends.withLockedValue { $0 } == 1 })
        // Another node takes the row over (as after an expired lease) while the first is still sending.
        try await database.write { db in
            try db.execute(sql: "UPDATE deliveries SET leaseTag = 42, leaseOwner = 42, reason = 'taken over' WHERE id = ?", arguments: [id])
        }
        try await sending.value
        let delivery = try await DeliveryStore(database: database).list(notification: 1).first { $0.id == id }
        #expect(delivery?.state == .pending)
        #expect(delivery?.reason == "taken over")
    }

    @Test("outcomes are recorded as they arrive: a fast push is sent on record while a slow one is still in flight")
    func recordedAsTheyArrive() async throws {
        let (dir, database, _) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        let registrations = RegistrationStore(database: database)
        let r = try await registrations.create(for: "alice")
        _ = try await registrations.update(id: r.id, for: "alice", with: DeviceRegistration(platform: "apns", handle: String(repeating: "cd", count: 32), tags: []))
        let created = try await NotificationStore(database: database).create(for: "alice", draft: NotificationDraft(), defaultImage: "logo.png")
        let slow = String(repeating: "ab", count: 32)
        // The slow device's answer waits for the gate, so however loaded the machine, the check
        // below comes before it.
        let gate = PushGate()
        let sending = Task { try await dispatcher(database, ScriptedProvider(gates: [slow: gate]), lease: 60).drain() }
        // The fast device's outcome is committed long before the slow one's answer comes (which
        // waits for the gate: the time allowed is only for a loaded machine, not the point).
        #expect(try await eventually(within: 30) {
            try await DeliveryStore(database: database).list(notification: created.notification.id).contains { $0.target != slow && $0.state == .sent }
        })
        #expect(try await DeliveryStore(database: database).list(notification: created.notification.id).first { $0.target == slow }?.state == .pending)
        gate.open()
        try await sending.value
        #expect(try await DeliveryStore(database: database).list(notification: created.notification.id).allSatisfy { $0.state == .sent })
    }

    @Test("a 410 removes the registration only if the device has not registered again since the push was claimed")
    func goneButRenewed() async throws {
        let (dir, database, _) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        let token = String(repeating: "ab", count: 32)
        let gate = PushGate()
        let provider = ScriptedProvider(gates: [token: gate], outcomes: [token: .failed(reason: "410 Unregistered", prune: true)])
        let sending = Task { try await dispatcher(database, provider, lease: 60).drain() }
        // While Apple's answer is on its way (the push claimed and held at the gate), the device registers its (new) token again.
        #expect(try await eventually(within: 30) { gate.arrived == 1 })
        let registrations = RegistrationStore(database: database)
        let id = try #require(try await registrations.list(for: "alice").first?.id)
        try await Task.sleep(for: .milliseconds(20)) // a later updatedAt
        _ = try await registrations.update(id: id, for: "alice", with: DeviceRegistration(platform: "apns", handle: token, tags: ["renewed"]))
        gate.open()
        try await sending.value
        #expect(try await registrations.list(for: "alice").map(\.id) == [id])
        // Without the renewal the same 410 removes it.
        let (dir2, database2, _) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir2) }
        try await dispatcher(database2, ScriptedProvider(outcomes: [token: .failed(reason: "410 Unregistered", prune: true)]), lease: 60).drain()
        #expect(try await RegistrationStore(database: database2).list(for: "alice").isEmpty)
    }
    @Test("a push whose life ended while it waited is failed by the outbox, for any platform, and never reaches a provider")
    func expiredBeforeSending() async throws {
        let (dir, database, _) = try await queued()
        defer { try? FileManager.default.removeItem(at: dir) }
        let created = try await NotificationStore(database: database)
            .create(for: "alice", draft: NotificationDraft(message: "sale ends at noon", options: PushOptions(expiresIn: 60)), defaultImage: "logo.png")
        // Made two minutes ago (a node was down, say): its 60 s life is over.
        try await database.write { db in
            try db.execute(sql: "UPDATE notifications SET createdAt = createdAt - 120 WHERE id = ?", arguments: [created.notification.id])
            try db.execute(sql: "UPDATE deliveries SET dueAt = dueAt - 120 WHERE notificationId = ?", arguments: [created.notification.id])
        }
        let provider = SlowProvider(delay: .zero)
        try await dispatcher(database, provider, lease: 60).drain()
        #expect(provider.sends.withLockedValue { $0 } == 1, "only the first notification, whose life is a day, was sent")
        let expired = try #require(try await DeliveryStore(database: database).list(notification: created.notification.id).first)
        #expect(expired.state == .failed && expired.attempts == 1, "\(expired)")
        #expect(expired.reason?.hasPrefix("expired: its life of 60 s") == true, "\(String(describing: expired.reason))")
    }
}
