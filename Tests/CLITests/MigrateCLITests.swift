import Foundation
import MediaStore
import NIOCore
@testable import RichPushCore
import RichPushTestSupport
import SQLEngine
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("richpush migrate: the embedded store into PostgreSQL and a bucket (SPEC §13)",
       .enabled(if: Postgres.available && SeaweedFS.available, "PostgreSQL or SeaweedFS is not installed"))
struct MigrateCLITests {
    @Test("media, users, registrations, notifications, a campaign and pending pushes arrive whole; the payload key goes along; a second run finishes an interrupted one; a damaged blob is named and not copied")
    func migrate() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let data = dir.appendingPathComponent("data").path
        let logo = Fixtures.media.appendingPathComponent("logo.png").path
        let coupon = Fixtures.media.appendingPathComponent("coupon.png").path
        // The source, as a user of the embedded store has it.
        #expect(try await CLI.run(["media", "add", "--name", "logo.png", logo, "--data", data]).status == 0)
        #expect(try await CLI.run(["media", "add", coupon, "--data", data]).status == 0)
        // Stored byte for byte with its comment (--keep-metadata): the copy must keep its id.
        let original = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg"))
        let commentedBytes = Array(original[0..<2]) + [0xFF, 0xFE, 0x00, 0x06] + Array("kept".utf8) + Array(original[2...])
        let commented = dir.appendingPathComponent("commented.jpg")
        try Data(commentedBytes).write(to: commented)
        #expect(try await CLI.run(["media", "add", "--keep-metadata", commented.path, "--data", data]).status == 0)
        for (name, admin) in [("root", true), ("alice", false), ("bob", false)] {
            #expect(try await CLI.run(["users", "add", name, "--password-stdin", "--data", data] + (admin ? ["--admin"] : []), stdin: "pw-\(name)\n").status == 0)
        }
        let source = try await DataStore.open(path: data)
        let registrations = source.registrations
        for (name, token, app) in [("alice", String(repeating: "ab", count: 32), "default"), ("bob", String(repeating: "cd", count: 32), "shop-ios")] {
            let registration = try await registrations.create(for: name)
            _ = try await registrations.update(id: registration.id, for: name,
                                               with: DeviceRegistration(platform: "apns", handle: token, tags: ["news"], app: app))
        }
        // docs/api.md#apps-and-api-keys: apps' registrations and API keys go along (only the keys' hashes are stored, and copied).
        let key = try await source.apiKeys.add(name: "backend", scope: .send, app: "shop-ios")
        let notifications = source.notifications(links: PayloadLinks(key: try await source.payloadKey(), baseURL: "https://push.example.com", lifetime: 3600))
        let first = try await notifications.create(for: "alice", draft: NotificationDraft(), defaultImage: "logo.png")
        try await notifications.markRead(ids: [first.notification.id])
        #expect(try await CLI.run(["send", "--all", "--image", coupon, "--message", "to all", "--data", data]).status == 0)
        let sourceDeliveries = try await source.deliveries.list(notification: first.notification.id)
        #expect(sourceDeliveries.map(\.state) == [.pending]) // no server ran: the pushes wait
        let sourceKey = try await source.payloadKey()
        let couponID = MediaID(hashing: try Fixtures.bytes(URL(fileURLWithPath: coupon)))
        // A variant, recorded against coupon.png: its push JPEG (its thumb would be larger than it, so it is its own thumb).
        let variant = try await source.media.variant(.push, of: couponID)
        #expect(variant.id != couponID)
        source.close()

        let target = try await StoreEngine.shared.locations()
        let environment = target.environment
        let arguments = ["migrate", "--data", data, "--to-database", try #require(target.database), "--to-blobs", try #require(target.blobs)]
        let copied = try await CLI.run(arguments, environment: environment)
        #expect(copied.status == 0, "\(copied.stderr)")
        #expect(copied.stdout.hasPrefix("copied 4 blobs (0 already there); rows: media 4, media_names 1, users 3, topics 0, segments 0, campaigns 1, notifications 4,"),
                "\(copied.stdout)")

        // Everything is there, as it was.
        let moved = try await DataStore.open(path: dir.appendingPathComponent("target").path, database: target.database, blobs: target.blobs,
                                             environment: environment)
        defer { moved.close() }
        #expect(try await moved.users.list().map(\.name) == ["alice", "bob", "root"])
        #expect(try await moved.users.verify(name: "alice", password: "pw-alice"))
        #expect(try await moved.users.list().first { $0.name == "root" }?.admin == true)
        let media = try await moved.media.list()
        #expect(Set(media.map(\.id)) == [MediaID(hashing: try Fixtures.bytes(URL(fileURLWithPath: logo))), couponID, MediaID(hashing: commentedBytes), variant.id])
        #expect(copied.stdout.contains("media_variants 1"), "\(copied.stdout)")
        #expect(try await moved.media.variant(.push, of: couponID).id == variant.id)
        #expect(media.first { $0.names == ["logo.png"] } != nil)
        for item in media {
            let bytes = try #require(try await moved.media.read(item.id, offset: 0, length: item.size))
            #expect(MediaID(hashing: Array(bytes.readableBytesView)) == item.id)
        }
        #expect(try await moved.registrations.list(for: "alice").map(\.handle) == [String(repeating: "ab", count: 32)])
        #expect(try await moved.registrations.list(for: "alice").map(\.app) == ["default"])
        #expect(try await moved.registrations.list(for: "bob").map(\.app) == ["shop-ios"])
        let movedAPIKey = try await moved.apiKeys.find(token: key)
        #expect(movedAPIKey?.name == "backend" && movedAPIKey?.scope == .send && movedAPIKey?.app == "shop-ios")
        #expect(copied.stdout.contains("api_keys 1"), "\(copied.stdout)")
        let inbox = try await moved.notifications().list(for: "alice")
        #expect(inbox.count == 2 && inbox.last?.id == first.notification.id, "\(inbox.map(\.id))")
        #expect(inbox.first { $0.id == first.notification.id }?.read == true)
        let pending = try await moved.deliveries.list(notification: first.notification.id)
        #expect(pending.map(\.state) == [.pending] && pending.map(\.target) == sourceDeliveries.map(\.target))
        // Payload URLs already sent keep working: the target signs with the same key.
        let movedKey = try await moved.payloadKey()
        let claims = try #require(PayloadLinks.claims(PayloadLinks(key: sourceKey, baseURL: "http://x", lifetime: 60)
            .token(notification: first.notification.id, payload: first.notification.payload, expires: Int64(Date().timeIntervalSince1970) + 60)))
        #expect(PayloadLinks(key: movedKey, baseURL: "http://x", lifetime: 60).isAuthentic(claims))
        // New rows get new ids after the copied ones.
        let next = try await moved.notifications().create(for: "bob", draft: NotificationDraft(), defaultImage: "logo.png")
        #expect(next.notification.id > first.notification.id + 2)

        // An interrupted copy (here: rows and a blob lost from the target) is finished by running it again.
        try await moved.database.write { db in try db.execute(sql: "DELETE FROM deliveries WHERE notificationId = ?", arguments: [first.notification.id]) }
        let again = try await CLI.run(arguments, environment: environment)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.hasPrefix("copied 0 blobs (4 already there)"), "\(again.stdout)")
        #expect(again.stdout.contains("deliveries 1,") && again.stdout.contains("users 0,"), "\(again.stdout)")
        #expect(try await moved.deliveries.list(notification: first.notification.id).map(\.state) == [.pending])

        // A blob damaged in the source is named, not copied; the rest goes on.
        let damaged = MediaID(hashing: try Fixtures.bytes(URL(fileURLWithPath: coupon)))
        let path = DataDirectory(path: data).blobPath(damaged)
        chmod(path, 0o644)
        var bytes = try Fixtures.bytes(URL(fileURLWithPath: path))
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fresh = try await StoreEngine.shared.locations()
        let broken = try await CLI.run(["migrate", "--data", data, "--to-database", try #require(fresh.database), "--to-blobs", try #require(fresh.blobs)],
                                       environment: fresh.environment)
        #expect(broken.status == 1)
        #expect(broken.stderr.contains("error: blob \(damaged.hex): damaged in the source"), "\(broken.stderr)")
        #expect(broken.stdout.hasPrefix("copied 3 blobs (0 already there)"), "\(broken.stdout)")
    }
}
