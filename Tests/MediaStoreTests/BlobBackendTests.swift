import Crypto
import Foundation
import SQLEngine
import NIOCore
@testable import MediaStore
import RichPushTestSupport
import Testing

/// Where a store under test keeps its blobs.
enum Backend: String, CustomTestStringConvertible, CaseIterable, Sendable {
    case files, s3
    var testDescription: String { rawValue }

    /// The backends this machine can run: S3 when SeaweedFS is installed (or required).
    static var available: [Backend] { SeaweedFS.available ? [.files, .s3] : [.files] }
}

/// A media store in a fresh data directory, with its blobs as files or in a fresh prefix of
/// the SeaweedFS bucket.
struct BackendStore {
    let dir: URL
    let store: MediaStore
    let backend: Backend
    let bucket: S3Client?

    static func make(_ backend: Backend) async throws -> BackendStore {
        let dir = try Fixtures.tempDirectory()
        let directory = DataDirectory(path: dir.appendingPathComponent("data").path)
        let database = try StoreDatabase.open(directory, migrations: StoreDatabase.mediaMigrations)
        var bucket: S3Client?
        if backend == .s3 {
            let weed = try await SeaweedFS.running()
            let location = try S3Location("s3://\(weed.bucket)/store-\(UInt32.random(in: 0 ... .max))?endpoint=\(weed.endpoint)&connect_timeout=15&timeout=30")
            bucket = S3Client(location: location, credentials: S3Credentials(accessKey: weed.accessKey, secretKey: weed.secretKey))
        }
        return BackendStore(dir: dir, store: MediaStore(directory: directory, database: database, bucket: bucket), backend: backend, bucket: bucket)
    }

    func cleanup() async {
        try? FileManager.default.removeItem(at: dir)
    }

    /// The blobs the backend holds, by id.
    func stored() async throws -> Set<String> {
        if let bucket {
            return Set(try await bucket.listAll(prefix: "sha256/").compactMap { RemoteBlobs.id(fromKey: $0.key)?.hex })
        }
        let files = (try? FileManager.default.subpathsOfDirectory(atPath: store.directory.blobsPath)) ?? []
        return Set(files.filter { $0.count > 3 }.map { String($0.split(separator: "/").last!) })
    }

    /// Replaces a blob's bytes behind the store's back.
    func damage(_ id: MediaID, with bytes: [UInt8]) async throws {
        if let bucket {
            let hash = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
            try await bucket.put(key: "sha256/\(id.hex.prefix(2))/\(id.hex)", body: ByteBuffer(bytes: bytes), sha256Hex: hash)
        } else {
            let path = store.directory.blobPath(id)
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            chmod(path, 0o644)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        }
    }
}

@Suite("Blob backends: files and S3, one suite")
struct BlobBackendTests {
    @Test("ingest, dedupe, read whole and by range, upload streams: the same on every backend", arguments: Backend.available)
    func ingestAndRead(_ backend: Backend) async throws {
        let t = try await BackendStore.make(backend)
        let png = PNGBuilder.rgb(width: 40, height: 30, seed: 3)
        let first = try await t.store.ingest(bytes: png, name: "pic")
        #expect(first.status == .stored)
        let again = try await t.store.ingest(bytes: png)
        #expect(again.status == .exists && again.item.id == first.item.id)
        #expect(try await t.stored() == [first.item.id.hex])
        #expect(try await t.store.read(first.item.id, length: png.count).map { Array($0.readableBytesView) } == png)
        #expect(try await t.store.read(first.item.id, offset: 10, length: 20).map { Array($0.readableBytesView) } == Array(png[10..<30]))
        #expect(await t.store.hasBlob(first.item.id))
        if backend == .s3 { #expect(t.store.blobPath(first.item.id).hasPrefix("s3://")) }

        let other = PNGBuilder.rgb(width: 8, height: 8, seed: 4)
        let chunks = AsyncThrowingStream<ByteBuffer, any Error> { c in
            c.yield(ByteBuffer(bytes: other.prefix(20)))
            c.yield(ByteBuffer(bytes: other.dropFirst(20)))
            c.finish()
        }
        let uploaded = try await t.store.ingest(upload: chunks, declaredLength: other.count)
        #expect(uploaded.status == .stored)
        #expect(try await t.store.read(uploaded.item.id, length: other.count).map { Array($0.readableBytesView) } == other)
        #expect(try await t.stored().count == 2)
        // A name another image holds is refused; the row count does not move.
        await #expect(throws: MediaStoreError.self) { try await t.store.ingest(bytes: other, name: "pic") }
        #expect(try await t.store.list().count == 2)
        await t.cleanup()
    }

    @Test("removal and gc: the row goes at once; the bytes go (files at once, S3 objects by a gc a minute later); verify stays clean",
          arguments: Backend.available)
    func removeAndCollect(_ backend: Backend) async throws {
        let t = try await BackendStore.make(backend)
        let png = PNGBuilder.rgb(width: 12, height: 12, seed: 5)
        let id = try await t.store.ingest(bytes: png).item.id
        _ = try await t.store.remove(id.hex)
        #expect(try await t.store.list().isEmpty)
        #expect(try await t.store.verify().problems.isEmpty)
        if backend == .s3 {
            #expect(try await t.stored() == [id.hex]) // not yet: an upload of the same bytes may be racing
            _ = try await t.store.collectGarbage(grace: 0)
            #expect(try await t.stored() == [id.hex]) // the removal is younger than a minute
            let report = try await t.store.collectGarbage(grace: 0, now: Date().addingTimeInterval(61))
            #expect(report.freedBytes == png.count)
        }
        #expect(try await t.stored().isEmpty)
        #expect(await !t.store.hasBlob(id))
        // Added again after all that: stored, readable.
        #expect(try await t.store.ingest(bytes: png).status == .stored)
        #expect(try await t.store.read(id, length: png.count).map { Array($0.readableBytesView) } == png)
        await t.cleanup()
    }

    @Test("an upload under way keeps its bytes from a removal's gc; a gc deleting them makes the upload wait, then write again",
          arguments: Backend.available.filter { $0 == .s3 })
    func uploadRacingRemoval(_ backend: Backend) async throws {
        let t = try await BackendStore.make(backend)
        let remote = try #require(t.store.remote)
        let png = PNGBuilder.rgb(width: 10, height: 10, seed: 6)
        let id = try await t.store.ingest(bytes: png).item.id
        _ = try await t.store.remove(id.hex)
        // Another process starts uploading the same bytes (its PUT done, its row not yet committed)…
        try await remote.beginUpload(id, database: t.store.database)
        // …so even a gc long after the removal leaves the object alone.
        _ = try await t.store.collectGarbage(grace: 0, now: Date().addingTimeInterval(120))
        #expect(try await t.stored() == [id.hex])
        // The upload commits: row and object both there.
        #expect(try await t.store.ingest(bytes: png).status == .stored)
        #expect(try await t.store.verify().problems.isEmpty)

        // A gc that has claimed an object for deletion: an upload of it waits until the deletion is done, then writes it again.
        _ = try await t.store.remove(id.hex)
        try await t.store.database.write { db in
            try db.execute(sql: "UPDATE media_pending SET state = 'deleting', at = ? WHERE sha256 = ?", arguments: [Date().timeIntervalSince1970, id.hex])
        }
        let upload = Task { try await t.store.ingest(bytes: png) }
        try await Task.sleep(for: .milliseconds(300))
        try await remote.client.delete(key: remote.key(id))
        try await t.store.database.write { db in try db.execute(sql: "DELETE FROM media_pending WHERE sha256 = ?", arguments: [id.hex]) }
        #expect(try await upload.value.status == .stored)
        #expect(try await t.stored() == [id.hex])
        #expect(try await t.store.verify().problems.isEmpty)
        await t.cleanup()
    }

    @Test("verify finds damaged and orphan blobs on every backend; gc removes the orphan after its grace", arguments: Backend.available)
    func verifyAndOrphans(_ backend: Backend) async throws {
        let t = try await BackendStore.make(backend)
        let good = PNGBuilder.rgb(width: 9, height: 9, seed: 7)
        let id = try await t.store.ingest(bytes: good).item.id
        #expect(try await t.store.verify() .problems.isEmpty)
        try await t.damage(id, with: PNGBuilder.rgb(width: 9, height: 9, seed: 8))
        let damaged = try await t.store.verify()
        #expect(damaged.problems.count == 1 && damaged.problems[0].what.contains("damaged"), "\(damaged.problems)")

        // An object with no row (a crash between the PUT and the commit).
        let stray = PNGBuilder.rgb(width: 5, height: 5, seed: 9)
        let strayID = MediaID(hashing: stray)
        try await t.damage(strayID, with: stray)
        let found = try await t.store.verify().problems.map(\.what)
        #expect(found.contains { $0.contains("orphan") }, "\(found)")
        let report = try await t.store.collectGarbage(grace: 60, now: Date().addingTimeInterval(3600))
        #expect(report.orphansRemoved == 1)
        #expect(!(try await t.stored()).contains(strayID.hex))
        await t.cleanup()
    }
}
