import Foundation
@testable import MediaStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RichPushTestSupport
import SQLEngine
import Testing

/// `thumb` and `push` (docs/configuration.md#the-media-store): made once, within their limits, upright, stored and removed
/// with their source.
@Suite("Media variants")
struct VariantTests {
    /// A `width`×`height` JPEG, left half red and right half blue, with noise so it does not
    /// compress to nothing; with an EXIF Orientation when asked.
    static func photo(width: Int, height: Int, quality: Int = 92, orientation: Int? = nil) throws -> [UInt8] {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for y in 0..<height {
            for x in 0..<width {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                let noise = UInt8(truncatingIfNeeded: seed >> 59)
                let i = (y * width + x) * 3
                if x < width / 2 { pixels[i] = 220 &+ noise; pixels[i + 1] = noise; pixels[i + 2] = noise } else { pixels[i] = noise; pixels[i + 1] = noise; pixels[i + 2] = 220 &+ noise }
            }
        }
        let jpeg = try JPEGEncoder.encode(pixels: pixels, width: width, height: height, components: 3, quality: quality)
        guard let orientation else { return jpeg }
        let exif = JPEGParts.exif(ExifBuilder(bigEndian: false).tiff(orientation: orientation))
        return Array(jpeg[0..<2]) + exif + Array(jpeg[2...])
    }

    func pixels(of store: MediaStore, _ item: MediaItem) async throws -> Pixels {
        let bytes = try #require(try await store.read(item.id, length: item.size))
        return try VariantMaker.decode(Array(bytes.readableBytesView), fittingIn: 0)
    }

    @Test("push of a 6 MP photo: a baseline JPEG within 2048 px and 1 MB; thumb within 320×320; both made once and recorded", arguments: StoreEngine.all)
    func limits(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await CorpusTests.store(engine, in: dir)
        let source = try await store.ingest(bytes: try Self.photo(width: 3000, height: 2000, quality: 98), name: "photo").item
        #expect(source.size > 1_048_576)
        let push = try await store.variant(.push, of: source.id)
        #expect(push.id != source.id && push.info.contentType == "image/jpeg" && !push.info.interlaced)
        #expect(push.info.width == 2048 && push.info.height == 1365 && push.size <= 1_048_576, "\(push.info) \(push.size)")
        let thumb = try await store.variant(.thumb, of: source.id)
        #expect(thumb.info.contentType == "image/jpeg" && thumb.info.width == 320 && thumb.info.height == 213)
        // Recorded: asked again, the same items, nothing new stored.
        let rows = try await store.list().count
        #expect(try await store.variant(.push, of: source.id) == push)
        #expect(try await store.variant(.thumb, of: source.id).id == thumb.id)
        #expect(try await store.list().count == rows && rows == 3)
        // Each is validated, verified and kept by gc like any stored image.
        let verified = try await store.verify()
        #expect(verified.checked == 3 && verified.problems.isEmpty)
        // gc keeps them while their (named) source is kept.
        _ = try await store.collectGarbage(grace: 0)
        let keptPush = try await store.item(push.id), keptThumb = try await store.item(thumb.id)
        #expect(keptPush != nil && keptThumb != nil)
        // The pixels are the photo's: red on the left, blue on the right.
        let made = try await pixels(of: store, thumb)
        let left = made.bytes[(100 * made.width + 40) * 3..<(100 * made.width + 40) * 3 + 3]
        let right = made.bytes[(100 * made.width + 280) * 3..<(100 * made.width + 280) * 3 + 3]
        #expect(left[left.startIndex] > 180 && left[left.startIndex + 2] < 80 && right[right.startIndex + 2] > 180 && right[right.startIndex] < 80)
    }

    @Test("orientation is applied to the pixels: a 400×200 photo tagged 'rotate 90° clockwise' gives a 160×320 thumb, red on top")
    func orientation() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        let source = try await store.ingest(bytes: try Self.photo(width: 400, height: 200, orientation: 6)).item
        let thumb = try await store.variant(.thumb, of: source.id)
        #expect(thumb.info.width == 160 && thumb.info.height == 320)
        let made = try await pixels(of: store, thumb)
        let stored = try #require(try await store.read(thumb.id, length: thumb.size))
        #expect(MetadataStripper.orientation(Array(stored.readableBytesView)) == nil) // upright without a tag
        let top = (40 * made.width + 80) * 3, bottom = (280 * made.width + 80) * 3
        #expect(made.bytes[top] > 180 && made.bytes[top + 2] < 80, "top \(made.bytes[top..<top + 3])")
        #expect(made.bytes[bottom + 2] > 180 && made.bytes[bottom] < 80, "bottom \(made.bytes[bottom..<bottom + 3])")
        // Even when it fits, a tagged source is turned for push.
        let push = try await store.variant(.push, of: source.id)
        #expect(push.id != source.id && push.info.width == 200 && push.info.height == 400)
    }

    @Test("a PNG with alpha: thumb stays a PNG with its transparency; push is a JPEG over white")
    func alpha() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        let (w, h) = (800, 600)
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        for i in 0..<(w * h) { rgba[i * 4] = 30; rgba[i * 4 + 1] = 200; rgba[i * 4 + 2] = 40; rgba[i * 4 + 3] = i % w < w / 2 ? 0 : 255 }
        let png = try Pixels(bytes: rgba, width: w, height: h, components: 4).png()
        let source = try await store.ingest(bytes: png).item
        let thumb = try await store.variant(.thumb, of: source.id)
        #expect(thumb.info.contentType == "image/png" && thumb.info.width == 320 && thumb.info.height == 240 && thumb.info.colorModel == "rgba")
        let made = try await pixels(of: store, thumb)
        #expect(made.bytes[(120 * 320 + 20) * 4 + 3] == 0 && made.bytes[(120 * 320 + 300) * 4 + 3] == 255)
        let push = try await store.variant(.push, of: source.id)
        #expect(push.info.contentType == "image/jpeg" && push.info.width == 800)
        let flat = try await pixels(of: store, push)
        let clear = (300 * 800 + 100) * 3
        #expect(flat.bytes[clear] > 240 && flat.bytes[clear + 1] > 240 && flat.bytes[clear + 2] > 240) // white where it was clear
    }

    /// The ICC profile of a JPEG: its APP2 `ICC_PROFILE` segments' data, in order.
    static func iccProfile(_ jpeg: [UInt8]) -> [UInt8] {
        var i = 2, profile: [UInt8] = []
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF, jpeg[i + 1] != 0xDA {
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            let payload = Array(jpeg[(i + 4)..<min(jpeg.count, i + 2 + length)])
            if jpeg[i + 1] == 0xE2, payload.starts(with: Array("ICC_PROFILE\0".utf8)) { profile += payload.dropFirst(14) }
            i += 2 + length
        }
        return profile
    }

    @Test("the source's ICC profile goes along into push and thumb, so a Display P3 photo keeps its colours")
    func iccKept() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        let plain = try Self.photo(width: 2400, height: 1600)
        let app0 = 4 + (Int(plain[4]) << 8 | Int(plain[5]))
        let tagged = Array(plain[..<app0]) + JPEGParts.icc1 + JPEGParts.icc2 + Array(plain[app0...])
        let expected = Self.iccProfile(tagged)
        #expect(expected.count == 300 + 120)
        let source = try await store.ingest(bytes: tagged).item
        for kind in MediaVariant.allCases {
            let variant = try await store.variant(kind, of: source.id)
            #expect(variant.id != source.id)
            let bytes = try #require(try await store.read(variant.id, length: variant.size))
            #expect(Self.iccProfile(Array(bytes.readableBytesView)) == expected, "\(kind)")
        }
        // Without a profile, none is made up.
        let untagged = try await store.ingest(bytes: plain).item
        let push = try await store.variant(.push, of: untagged.id)
        let pushBytes = try #require(try await store.read(push.id, length: push.size))
        #expect(Self.iccProfile(Array(pushBytes.readableBytesView)).isEmpty)
    }

    @Test("a small upright JPEG is its own push and thumb variant: nothing is made")
    func identity() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        let source = try await store.ingest(bytes: try JPEGParts.base()).item
        #expect(try await store.variant(.push, of: source.id) == source)
        #expect(try await store.variant(.thumb, of: source.id) == source)
        #expect(try await store.list().count == 1)
    }

    @Test("a thumb is never larger than its source: a small, highly compressed photo over 320 px, and logo.png, are their own thumbs, recorded so", arguments: StoreEngine.all)
    func thumbNeverLarger(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await CorpusTests.store(engine, in: dir)
        // 400×400 at quality 20: about 5 KB; its noise at quality 80 and 320×320 is about 12 KB.
        let photo = try Self.photo(width: 400, height: 400, quality: 20)
        let fitted = try VariantMaker.decode(photo, fittingIn: MediaVariant.thumb.box)
        let wouldBe = try JPEGEncoder.encode(pixels: fitted.bytes, width: fitted.width, height: fitted.height, components: fitted.components, quality: 80)
        #expect(wouldBe.count > photo.count, "the made thumb would be \(wouldBe.count) bytes, the source \(photo.count)")
        let logo = try Fixtures.bytes(Fixtures.media.appendingPathComponent("logo.png"))
        for (bytes, contentType) in [(photo, "image/jpeg"), (logo, "image/png")] {
            let source = try await store.ingest(bytes: bytes).item
            let thumb = try await store.variant(.thumb, of: source.id)
            // The source itself, with its own type: what is served says what it is.
            #expect(thumb.id == source.id && thumb.size == bytes.count && thumb.info.contentType == contentType, "\(contentType): \(thumb.info) \(thumb.size)")
            let recorded = try await store.database.read { db in
                try String.fetchOne(db, sql: "SELECT variant FROM media_variants WHERE source = ? AND kind = 'thumb'", arguments: [source.id.hex])
            }
            #expect(recorded == source.id.hex)
            #expect(try await store.variant(.thumb, of: source.id).id == source.id)
        }
        // Nothing made was kept.
        #expect(try await store.list().count == 2)
        // A photo whose thumb is smaller still gets one made, within 320×320.
        let big = try await store.ingest(bytes: try Self.photo(width: 1200, height: 800)).item
        let bigThumb = try await store.variant(.thumb, of: big.id)
        #expect(bigThumb.id != big.id && bigThumb.size < big.size && bigThumb.info.width == 320 && bigThumb.info.contentType == "image/jpeg")
    }

    @Test("concurrent first requests make a variant once; removing the source removes its variants, rows and files", arguments: StoreEngine.all)
    func onceAndRemoved(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await CorpusTests.store(engine, in: dir)
        let source = try await store.ingest(bytes: try Self.photo(width: 2400, height: 1600)).item
        let ids = try await withThrowingTaskGroup(of: MediaID.self) { group in
            for _ in 0..<8 { group.addTask { try await store.variant(.push, of: source.id).id } }
            return try await group.reduce(into: Set<MediaID>()) { $0.insert($1) }
        }
        #expect(ids.count == 1 && !ids.contains(source.id))
        #expect(try await store.list().count == 2)
        let push = try #require(ids.first)
        // The variant is in use by its source: it cannot be removed alone.
        await #expect(throws: MediaStoreError.self) { try await store.remove(push.hex) }
        _ = try await store.remove(source.id.hex)
        let left = try await store.list()
        #expect(try await store.item(push) == nil && left.isEmpty)
        if store.remote == nil { #expect(!FileManager.default.fileExists(atPath: store.blobPath(push))) }
        let rows = try await store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM media_variants") }
        #expect(rows == 0)
    }

    @Test("a source that is not stored is notFound")
    func unknown() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        await #expect(throws: MediaStoreError.self) { try await store.variant(.push, of: MediaID(hashing: [1, 2, 3])) }
    }
}

extension VariantTests {
    @Test("variants of more than 8 sources at once: the ninth is refused as busy instead of queueing its source in memory")
    func boundedMakers() async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try MediaStore(path: dir.path)
        var sources: [MediaID] = []
        for i in 0..<(MediaStore.maxVariantsInFlight + 1) {
            sources.append(try await store.ingest(bytes: try Self.photo(width: 64 + i, height: 48)).item.id)
        }
        // The one variant thread is held, so every maker waits (holding its source) until the gate opens.
        let gate = NIOLockedValueBox(false)
        let holder = DecodePool.variants.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.next()) {
            for _ in 0..<1000 where !gate.withLockedValue({ $0 }) { usleep(5_000) } // at most 5 s
        }
        let makers = sources.prefix(MediaStore.maxVariantsInFlight).map { id in Task { try await store.variant(.thumb, of: id) } }
        // Every maker has registered once its first database read is done; then the ninth is refused.
        for _ in 0..<500 where store.variantsBeingMade < MediaStore.maxVariantsInFlight { try await Task.sleep(for: .milliseconds(10)) }
        var refusal: MediaStoreError?
        do {
            _ = try await store.variant(.thumb, of: sources[MediaStore.maxVariantsInFlight])
        } catch let error as MediaStoreError where error.isBusy {
            refusal = error
        }
        gate.withLockedValue { $0 = true }
        try await holder.get()
        #expect(refusal?.message.contains("variants are being made") == true)
        for maker in makers { #expect(try await maker.value.info.width <= 320) }
        // Once they are done, the ninth is made.
        #expect(try await store.variant(.thumb, of: sources[MediaStore.maxVariantsInFlight]).info.width <= 320)
    }
}
