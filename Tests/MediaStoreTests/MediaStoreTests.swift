import Crypto
import Foundation
import SQLEngine
@testable import MediaStore
import RichPushTestSupport
import Testing

/// A store in a fresh temporary data directory.
struct TempStore {
    let dir: URL
    let store: MediaStore

    init(limits: MediaLimits = .default) throws {
        dir = try Fixtures.tempDirectory()
        store = try MediaStore(path: dir.appendingPathComponent("data").path, limits: limits)
    }

    func cleanup() { try? FileManager.default.removeItem(at: dir) }

    func rowCount(_ table: String = "media") async throws -> Int {
        try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)")! }
    }

    func blobFiles() throws -> [String] {
        try FileManager.default.subpathsOfDirectory(atPath: store.directory.blobsPath).filter { $0.count > 3 }
    }

    func tmpFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: store.directory.tmpPath)
    }
}

@Suite("Media store")
struct MediaStoreTests {
    @Test("the same bytes twice give one blob: stored, then exists")
    func dedupe() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let png = PNGBuilder.rgb(width: 20, height: 20, seed: 9)
        let first = try await t.store.ingest(bytes: png)
        let second = try await t.store.ingest(bytes: png)
        #expect(first.status == .stored && second.status == .exists)
        #expect(first.item.id == second.item.id)
        #expect(first.item.id == MediaID(hashing: png))
        #expect(try t.blobFiles() == ["\(first.item.id.hex.prefix(2))/\(first.item.id.hex)"])
        #expect(try await t.rowCount() == 1)
        #expect(try t.tmpFiles().isEmpty)
    }

    @Test("many tasks adding the same bytes at once: one stored, the rest exists, one blob")
    func concurrentSameBytes() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let png = PNGBuilder.rgb(width: 300, height: 200, seed: 4)
        let statuses = try await withThrowingTaskGroup(of: IngestStatus.self) { group in
            for _ in 0..<24 { group.addTask { try await t.store.ingest(bytes: png).status } }
            return try await group.reduce(into: [IngestStatus]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == .stored }.count == 1)
        #expect(statuses.filter { $0 == .exists }.count == 23)
        #expect(try t.blobFiles().count == 1)
        #expect(try t.tmpFiles().isEmpty)
        #expect(try await t.store.verify().problems.isEmpty)
    }

    @Test("a rejected image leaves no blob, row or temp file", arguments: [
        PNGBuilder.rgb(width: 30, height: 30).prefix(200).map { $0 },
        Array("GIF89a\u{1}\u{0}\u{1}\u{0}".utf8),
        Array("%PDF-1.4\n".utf8),
        PNGBuilder.signature + PNGBuilder.ihdr(width: 30_000, height: 30_000) + PNGBuilder.chunk("IEND", []),
    ])
    func rejectionLeavesNothing(_ bytes: [UInt8]) async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        await #expect(throws: MediaRejection.self) { try await t.store.ingest(bytes: bytes, name: "x") }
        #expect(try await t.rowCount() == 0)
        #expect(try await t.rowCount("media_names") == 0)
        #expect(try t.blobFiles().isEmpty)
        #expect(try t.tmpFiles().isEmpty)
    }

    @Test("a file over --max-bytes is refused without being read")
    func oversizedFile() async throws {
        let t = try TempStore(limits: MediaLimits(maxBytes: 1000, maxPixels: 1 << 30, maxSide: 1000))
        defer { t.cleanup() }
        let path = t.dir.appendingPathComponent("big.png")
        let png = PNGBuilder.rgb(width: 100, height: 100)
        try Data(png).write(to: path)
        await #expect(throws: MediaRejection(.tooLarge, "\(png.count) bytes, over the limit of 1000 bytes")) {
            try await t.store.ingest(file: path.path)
        }
        #expect(try t.tmpFiles().isEmpty)
    }

    @Test("a media id is 64 hex digits of either case, kept in lowercase; anything else is refused")
    func mediaIDs() {
        let lower = String(repeating: "0123456789abcdef", count: 4)
        #expect(MediaID(lower)?.hex == lower)
        #expect(MediaID(lower.uppercased())?.hex == lower)
        #expect(MediaID("A" + lower.dropFirst())?.hex == "a" + lower.dropFirst())
        #expect(MediaID(String(lower.dropFirst())) == nil)
        #expect(MediaID(lower + "0") == nil)
        #expect(MediaID("g" + lower.dropFirst()) == nil)
        #expect(MediaID("../" + lower.dropFirst(3)) == nil)
        #expect(MediaID(String(repeating: "é", count: 32)) == nil)
        // Its digest bytes read back: from an uppercase id too, and for every byte value.
        #expect(MediaID(lower.uppercased())?.digestBytes == Array(repeating: [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF], count: 4).flatMap { $0 })
        let every = (0..<32).map { UInt8($0 * 8 + 7) }
        #expect(MediaID(digestBytes: every).digestBytes == every)
        #expect(MediaID(hashing: Data("logo".utf8)).digestBytes == Array(SHA256.hash(data: Data("logo".utf8))))
    }

    @Test("names resolve, are never moved by an upload, and are removed; removing the last name of an unused blob removes it")
    func names() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let a = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 1), name: "logo.png")
        #expect(try await t.store.resolve("logo.png")?.id == a.item.id)
        #expect(try await t.store.resolve(a.item.id.hex.uppercased())?.id == a.item.id)
        // The same bytes under the same name again: fine. Other bytes under a taken name: refused, nothing stored.
        #expect(try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 1), name: "logo.png").status == .exists)
        let other = PNGBuilder.rgb(width: 8, height: 8, seed: 3)
        await #expect { try await t.store.ingest(bytes: other, name: "logo.png") } throws: { ($0 as? MediaStoreError)?.isNameTaken == true }
        #expect(try await t.store.resolve("logo.png")?.id == a.item.id)
        #expect(try await t.store.resolve(MediaID(hashing: other).hex) == nil)
        #expect(try t.blobFiles().count == 1)
        #expect(try await t.store.remove("logo.png").deletedBlob == a.item.id) // its only name, unused: the blob goes too
        let b = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 2), name: "logo.png")
        #expect(try await t.store.resolve("logo.png")?.id == b.item.id)
        await #expect(throws: MediaStoreError.self) { try await t.store.ingest(bytes: [1], name: String(repeating: "a", count: 64)) }
        let removal = try await t.store.remove("logo.png")
        #expect(removal.name == "logo.png" && removal.deletedBlob == b.item.id)
        #expect(try await t.store.resolve(b.item.id.hex) == nil)
        #expect(try await t.store.resolve(a.item.id.hex) == nil)
        await #expect(throws: MediaStoreError.self) { try await t.store.remove("logo.png") }
    }

    @Test("a referenced blob cannot be removed by id and survives gc")
    func references() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let a = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 1))
        try await t.store.database.write { db in try MediaIndex.addReference(db, id: a.item.id, owner: "notification:1") }
        await #expect(throws: MediaStoreError.self) { try await t.store.remove(a.item.id.hex) }
        let report = try await t.store.collectGarbage(grace: 0, now: Date().addingTimeInterval(10))
        #expect(report.removed.isEmpty)
        try await t.store.database.write { db in try MediaIndex.removeReference(db, id: a.item.id, owner: "notification:1") }
        #expect(try await t.store.remove(a.item.id.hex).deletedBlob == a.item.id)
        #expect(try t.blobFiles().isEmpty)
    }

    @Test("gc removes unreferenced blobs past the grace, keeps named ones and young ones, and orphan files")
    func garbageCollection() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let named = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 1), name: "keep")
        let loose = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 8, height: 8, seed: 2))
        let young = try await t.store.collectGarbage(grace: 3600)
        #expect(young.removed.isEmpty)
        // An orphan: a blob file with no row (as a crash between rename and commit leaves).
        let orphan = MediaID(hashing: [1, 2, 3])
        try FileManager.default.createDirectory(atPath: (t.store.blobPath(orphan) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: t.store.blobPath(orphan)))
        #expect(try await t.store.verify().problems.count == 1)
        let report = try await t.store.collectGarbage(grace: 0, now: Date().addingTimeInterval(5))
        #expect(report.removed == [loose.item.id])
        #expect(report.orphansRemoved == 1)
        #expect(try await t.store.resolve(named.item.id.hex) != nil)
        #expect(try t.blobFiles().count == 1)
        #expect(try await t.store.verify().problems.isEmpty)
    }

    @Test("verify finds a flipped byte, a missing file and a wrong size")
    func verify() async throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let items = try await [1, 2, 3].asyncMap { try await t.store.ingest(bytes: PNGBuilder.rgb(width: 16, height: 16, seed: UInt64($0))).item }
        #expect(try await t.store.verify().problems.isEmpty)
        var bytes = try Fixtures.bytes(URL(fileURLWithPath: t.store.blobPath(items[0].id)))
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: t.store.blobPath(items[0].id)))
        try FileManager.default.removeItem(atPath: t.store.blobPath(items[1].id))
        try Data(bytes.prefix(10)).write(to: URL(fileURLWithPath: t.store.blobPath(items[2].id)))
        let (checked, problems) = try await t.store.verify()
        #expect(checked == 3)
        #expect(problems.count == 3)
        #expect(problems.contains { $0.path.hasSuffix(items[0].id.hex) && $0.what.contains("damaged") })
        #expect(problems.contains { $0.path.hasSuffix(items[1].id.hex) && $0.what.contains("missing") })
        #expect(problems.contains { $0.path.hasSuffix(items[2].id.hex) && $0.what.contains("size") })
        // Re-adding the bytes of the missing blob restores it.
        _ = try await t.store.ingest(bytes: PNGBuilder.rgb(width: 16, height: 16, seed: 2))
        #expect(try await t.store.verify().problems.count == 2)
    }

    @Test("temp files of dead processes, and of an earlier process that had our pid (pid 1 in a container), are removed at start-up; a live one's are kept")
    func tmpCleanup() throws {
        let t = try TempStore()
        defer { t.cleanup() }
        let tmp = t.store.directory.tmpPath
        let mine = "\(TmpName.prefix)1.upload.part"                                           // this process's own
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/\(mine)"))
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/999999999.1.abc.part"))
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/\(getpid()).77.abc.part"))          // an earlier process's, same pid
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/\(getpid()).0badf00d.3.upload.part")) // likewise, newer format
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/1.0badf00d.3.upload.part"))          // pid 1 lives: kept
        try Data([1]).write(to: URL(fileURLWithPath: "\(tmp)/stray"))
        try t.store.directory.prepare()
        #expect(try t.tmpFiles().sorted() == ["1.0badf00d.3.upload.part", mine].sorted())
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
