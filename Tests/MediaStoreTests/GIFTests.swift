import Foundation
import MediaStore
import NIOCore
import RichPushTestSupport
import Testing

/// docs/api.md#options-badges-and-paced-sends: animated GIFs are media too, validated by a full decode with giflib, bounded like
/// PNG, stripped of metadata without re-encoding, with a GIF push variant and a PNG thumb.
@Suite("GIF: decode, bounds, stripping and variants (SPEC §22)")
struct GIFTests {
    static let frames = (0..<3).map { GIFBuilder.Frame.pattern(width: 40, height: 30, seed: $0) }
    static let animated = GIFBuilder.gif(width: 40, height: 30, frames: frames)

    @Test("an animated GIF is accepted as image/gif with its canvas size; a GIF87a too")
    func accepted() throws {
        let info = try ImageInspector.inspect(Self.animated, limits: .default)
        #expect(info.contentType == "image/gif" && info.width == 40 && info.height == 30)
        var old = GIFBuilder.gif(width: 8, height: 8, frames: [.pattern(width: 8, height: 8)], loop: false)
        old.replaceSubrange(0..<6, with: Array("GIF87a".utf8))
        // GIF87a has no extensions: the builder's graphic control extension is dropped from it.
        let plain = Array(old[0..<25]) + Array(GIFBuilder.image(.pattern(width: 8, height: 8)).dropFirst(8)) + [0x3B]
        #expect(try ImageInspector.inspect(plain, limits: .default).contentType == "image/gif")
    }

    @Test("comments, XMP, ICC and bytes after the trailer are stripped block by block; the loop and every frame stay")
    func stripped() throws {
        let tagged = GIFBuilder.gif(width: 40, height: 30, frames: Self.frames, comment: "shot at 48.85N 2.35E", xmp: true, icc: true,
                                    trailing: Array("appended secret".utf8))
        let (bytes, removed) = MetadataStripper.strip(tagged)
        #expect(removed == [.xmp, .comment, .applicationSegment, .trailingData], "\(removed)")
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.contains("48.85") && !text.contains("secret") && !text.contains("XMP") && !text.contains("ICCRGBG"))
        #expect(text.contains("NETSCAPE2.0"))
        // Nothing but the dropped blocks changed: the same bytes as the GIF written without them.
        #expect(bytes == Self.animated)
        #expect(try ImageInspector.inspect(bytes, limits: .default).width == 40)
        // Nothing to remove: the same bytes back.
        #expect(MetadataStripper.strip(Self.animated).removed.isEmpty && MetadataStripper.strip(Self.animated).bytes == Self.animated)
    }

    @Test("the thumb is the first frame as a PNG; the push variant is the GIF itself when it fits, else a smaller animated GIF", arguments: StoreEngine.all)
    func variants(engine: StoreEngine) async throws {
        let dir = try Fixtures.tempDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await CorpusTests.store(engine, in: dir)
        let small = try await store.ingest(bytes: Self.animated, name: "small.gif").item
        #expect(small.info.contentType == "image/gif")
        let thumb = try await store.variant(.thumb, of: small.id)
        #expect(thumb.info.contentType == "image/png" && thumb.info.width == 40 && thumb.info.height == 30)
        #expect(try await store.variant(.push, of: small.id).id == small.id)
        // A canvas wider than 2048: scaled to fit, still animated, every frame kept.
        let wide = GIFBuilder.gif(width: 3000, height: 60, frames: (0..<2).map { GIFBuilder.Frame.pattern(width: 3000, height: 60, seed: $0) })
        let source = try await store.ingest(bytes: wide, name: "wide.gif").item
        let push = try await store.variant(.push, of: source.id)
        #expect(push.info.contentType == "image/gif" && push.info.width <= 2048 && push.size <= MediaVariant.maxGIFBytes, "\(push.info)")
        let pushBytes = try #require(try await store.read(push.id, length: push.size)).readableBytesView
        #expect(Array(pushBytes).split(separator: 0x2C, omittingEmptySubsequences: false).count > 2, "two image descriptors at least")
        let wideThumb = try await store.variant(.thumb, of: source.id)
        #expect(wideThumb.info.contentType == "image/png" && wideThumb.info.width == 320)
    }

    @Test("GIF bombs settle within a second of CPU: a canvas past the side limit, 5,001 frames, frames past the pixel budget, a flood of clear codes, an undefined code, a cut frame")
    func bombs() throws {
        let one = GIFBuilder.Frame.pattern(width: 1, height: 1)
        var cases: [(String, [UInt8], MediaRejection.Kind, MediaLimits)] = []
        cases.append(("canvas 20000 × 10", GIFBuilder.gif(width: 20_000, height: 10, frames: [one]), .tooLarge, .default))
        cases.append(("5,001 frames", GIFBuilder.gif(width: 1, height: 1, frames: Array(repeating: one, count: 5_001)), .tooLarge, .default))
        let budget = MediaLimits(maxBytes: 10_485_760, maxPixels: 10_000, maxSide: 16_384)
        cases.append(("3 × 100 × 100 over a 20,000-pixel budget",
                      GIFBuilder.gif(width: 100, height: 100, frames: (0..<3).map { GIFBuilder.Frame.pattern(width: 100, height: 100, seed: $0) }),
                      .tooLarge, budget))
        let flood = GIFBuilder.codes(Array(repeating: 256, count: 600_000) + [0, 257])
        cases.append(("600,000 clear codes", GIFBuilder.gif(width: 1, height: 1, frames: []).dropLast() + GIFBuilder.image(one, data: flood) + [0x3B],
                      .corrupt, .default))
        let undefined = GIFBuilder.codes([256, 1, 300, 257])
        cases.append(("an undefined code", GIFBuilder.gif(width: 4, height: 1, frames: []).dropLast()
                      + GIFBuilder.image(GIFBuilder.Frame(width: 4, height: 1, indices: [1, 1, 1, 1]), data: undefined) + [0x3B], .corrupt, .default))
        let whole = GIFBuilder.gif(width: 40, height: 30, frames: [Self.frames[0]], loop: false)
        cases.append(("a frame cut short", Array(whole.prefix(whole.count - 40)), .corrupt, .default))
        for (name, bomb, kind, limits) in cases {
            var verdict: MediaRejection?
            let seconds = cpuSeconds { verdict = rejection(bomb, limits: limits) }
            #expect(verdict?.kind == kind, "\(name): \(String(describing: verdict))")
            #expect(seconds < 1, "\(name): \(seconds) s")
        }
    }
}
