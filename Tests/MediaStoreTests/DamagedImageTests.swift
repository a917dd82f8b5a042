import Foundation
import MediaStore
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

func rejection(_ bytes: [UInt8], limits: MediaLimits = .default) -> MediaRejection? {
    do {
        _ = try ImageInspector.inspect(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}

@Suite("Damaged and hostile images")
struct DamagedImageTests {
    let png = PNGBuilder.rgb(width: 64, height: 48, seed: 3)

    @Test("the generated PNG itself is valid")
    func baseline() throws {
        let info = try ImageInspector.inspect(png, limits: .default)
        #expect(info.width == 64 && info.height == 48 && info.contentType == "image/png")
    }

    @Test("a PNG truncated anywhere is corrupt", arguments: [9, 20, 33, 40, 100, 5000, 9000])
    func truncatedPNG(at length: Int) {
        let cut = Array(png.prefix(length))
        #expect(rejection(cut)?.kind == .corrupt, "cut at \(length)")
    }

    @Test("a PNG missing only its IEND is corrupt")
    func missingIEND() {
        #expect(rejection(Array(png.dropLast(12)))?.kind == .corrupt)
    }

    @Test("a damaged zlib stream with valid CRCs is corrupt")
    func damagedZlib() throws {
        // Compressible content so the stream is real deflate data, not stored blocks.
        let basn = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("pngsuite/basn2c08.png"))
        var chunks = PNGBuilder.chunks(basn)
        let idat = chunks.firstIndex { $0.type == "IDAT" }!
        for position in [2, chunks[idat].data.count / 2, chunks[idat].data.count - 5] {
            var damaged = chunks
            damaged[idat].data[position] ^= 0x5A
            let bytes = PNGBuilder.assemble(damaged) // recomputes every CRC
            let result = rejection(bytes)
            #expect(result?.kind == .corrupt, "flip at \(position)")
        }
        // The Adler-32 at the end of the zlib stream is checked too.
        var badAdler = chunks
        badAdler[idat].data[badAdler[idat].data.count - 1] ^= 0x01
        #expect(rejection(PNGBuilder.assemble(badAdler))?.kind == .corrupt)
        // And a stream cut short inside a valid IDAT chunk.
        var short = chunks
        short[idat].data.removeLast(short[idat].data.count / 2)
        #expect(rejection(PNGBuilder.assemble(short))?.kind == .corrupt)
        chunks[idat].data = chunks[idat].data // unchanged: still valid
        #expect(rejection(PNGBuilder.assemble(chunks)) == nil)
    }

    @Test("decompression bombs are refused from the header, without a large allocation")
    func bombs() {
        let zeros = PNGBuilder.chunk("IDAT", PNGBuilder.zlibZeros(count: 800_000))
        let cases: [(UInt32, UInt32, String)] = [
            (20_000, 20_000, "side"),          // 400 MP, sides over 16384
            (16_000, 16_000, "pixels"),        // 256 MP, sides within, pixels over
            (100_000, 3, "side"),
        ]
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let before = usage.ru_maxrss
        for (w, h, what) in cases {
            let bomb = PNGBuilder.signature + PNGBuilder.ihdr(width: w, height: h, bitDepth: 16, colorType: 6) + zeros + PNGBuilder.chunk("IEND", [])
            #expect(bomb.count < 8_000, "a bomb is a few KB")
            let result = rejection(bomb)
            #expect(result?.kind == .tooLarge, "\(w)x\(h)")
            #expect(result?.reason.contains("\(w)x\(h)") == true)
            #expect(result?.reason.contains(what == "side" ? "side" : "pixels") == true)
        }
        getrusage(RUSAGE_SELF.rawValue, &usage)
        // A 16000×16000 RGBA16 frame would be 2 GB; the peak must not have moved by anything near that.
        #expect(usage.ru_maxrss - before < 256 * 1024, "peak RSS grew by \(usage.ru_maxrss - before) KiB")
    }

    @Test("the limits are judged from the header alone, whatever follows it")
    func headerOnlyVerdicts() throws {
        let pngHeader = PNGBuilder.signature + PNGBuilder.ihdr(width: 20_000, height: 20_000)
        #expect(rejection(pngHeader + PNGBuilder.chunk("IEND", []))?.kind == .tooLarge)
        #expect(rejection(pngHeader + [1, 2, 3])?.kind == .tooLarge)
        // An IHDR whose CRC is wrong is not trusted for a verdict: libpng names the damage.
        var badCRC = pngHeader
        badCRC[badCRC.count - 1] ^= 0xFF
        #expect(rejection(badCRC + [1, 2, 3])?.reason.contains("CRC") == true)

        let jpeg = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg"))
        let sof = try #require((2..<jpeg.count - 1).first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xC0 })
        var huge = jpeg
        huge[sof + 5] = 0xEA; huge[sof + 6] = 0x60   // height 60000
        huge[sof + 7] = 0xEA; huge[sof + 8] = 0x60   // width 60000
        #expect(rejection(Array(huge.prefix(sof + 20)))?.kind == .tooLarge)
        #expect(rejection(huge) == MediaRejection(.tooLarge, "60000x60000 pixels: a side is over the limit of 16384"))
    }

    @Test("a bomb within raised limits is fully decoded and then accepted")
    func bombWithinLimits() {
        // 2000×2000 gray: 4 MB of zeros from a ~25 KB stream.
        let raw = 2000 * (2000 + 1)
        let bomb = PNGBuilder.signature + PNGBuilder.ihdr(width: 2000, height: 2000, bitDepth: 8, colorType: 0)
            + PNGBuilder.chunk("IDAT", PNGBuilder.zlibZeros(count: raw) + [0, 0, 0, 0]) + PNGBuilder.chunk("IEND", [])
        // The Adler-32 above is wrong on purpose: a full decode reaches the end and notices.
        #expect(rejection(bomb)?.kind == .corrupt)
        #expect(rejection(bomb, limits: MediaLimits(maxBytes: 1 << 20, maxPixels: 1_000_000, maxSide: 16384))?.kind == .tooLarge)
    }

    @Test("huge and lying chunk lengths are corrupt", arguments: [UInt32(0x7FFF_FFF0), 0xFFFF_FFFF, 1_000_000])
    func hugeChunkLength(_ length: UInt32) {
        let chunks = PNGBuilder.chunks(png)
        var bytes = PNGBuilder.signature + PNGBuilder.chunk("IHDR", chunks[0].data)
        bytes += PNGBuilder.chunk("tEXt", Array("Comment\u{0}hello".utf8), declaredLength: length)
        bytes += chunks.dropFirst().flatMap { PNGBuilder.chunk($0.type, $0.data) }
        #expect(rejection(bytes)?.kind == .corrupt)
        var idatLie = PNGBuilder.signature + PNGBuilder.chunk("IHDR", chunks[0].data)
        idatLie += PNGBuilder.chunk("IDAT", chunks[1].data, declaredLength: length)
        #expect(rejection(idatLie)?.kind == .corrupt)
    }

    @Test("a truncated or damaged JPEG is corrupt although libjpeg only warns")
    func damagedJPEG() throws {
        let jpeg = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg"))
        for length in [jpeg.count - 2, jpeg.count / 2, 700] {
            let result = rejection(Array(jpeg.prefix(length)))
            #expect(result?.kind == .corrupt, "cut at \(length)")
        }
        #expect(rejection(Array(jpeg.prefix(jpeg.count - 2)))?.reason.contains("Premature end of JPEG file") == true)
        var flipped = jpeg
        for i in stride(from: jpeg.count / 2, to: jpeg.count / 2 + 40, by: 4) { flipped[i] = 0xFF; flipped[i + 1] = 0xD0 }
        #expect(rejection(flipped)?.kind == .corrupt)
        #expect(rejection(Array(jpeg.prefix(3)))?.kind == .corrupt)
    }

    @Test("a JPEG over the side limit is refused before decoding")
    func jpegLimits() throws {
        let jpeg = try Fixtures.bytes(Fixtures.corpus.appendingPathComponent("jpeg/testorig.jpg"))
        let result = rejection(jpeg, limits: MediaLimits(maxBytes: 1 << 20, maxPixels: 1 << 30, maxSide: 100))
        #expect(result == MediaRejection(.tooLarge, "227x149 pixels: a side is over the limit of 100"))
    }

    @Test("bytes over --max-bytes are too_large")
    func maxBytes() {
        #expect(rejection(png, limits: MediaLimits(maxBytes: 1000, maxPixels: 1 << 30, maxSide: 100))
            == MediaRejection(.tooLarge, "\(png.count) bytes, over the limit of 1000 bytes"))
    }

    static let others: [(String, [UInt8], String)] = [
        ("WebP", Array("RIFF".utf8) + [26, 0, 0, 0] + Array("WEBPVP8 ".utf8) + [UInt8](repeating: 0, count: 14), "image/webp"),
        ("BMP", Array("BM".utf8) + [UInt8](repeating: 0, count: 60), "image/bmp"),
        ("TIFF", [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0] + [UInt8](repeating: 0, count: 20), "image/tiff"),
        ("TIFF big-endian", [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8] + [UInt8](repeating: 0, count: 20), "image/tiff"),
        ("HEIC", [0, 0, 0, 24] + Array("ftypheic".utf8) + [0, 0, 0, 0] + Array("mif1heic".utf8), "image/heic"),
        ("AVIF", [0, 0, 0, 28] + Array("ftypavif".utf8) + [0, 0, 0, 0] + Array("avifmif1miaf".utf8), "image/avif"),
        ("SVG", Array("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8), "image/svg+xml"),
        ("bare SVG", Array("  <svg width=\"10\" height=\"10\"></svg>".utf8), "image/svg+xml"),
        ("XML", Array("<?xml version=\"1.0\"?><feed/>".utf8), "application/xml"),
        ("HTML", Array("<!DOCTYPE html><html><body><img src=x></body></html>".utf8), "text/html"),
        ("PDF", Array("%PDF-1.7\n%âãÏÓ\n".utf8), "application/pdf"),
        ("ICO", [0, 0, 1, 0, 1, 0, 16, 16] + [UInt8](repeating: 0, count: 14), "image/x-icon"),
        ("ZIP", [0x50, 0x4B, 3, 4] + [UInt8](repeating: 0, count: 26), "application/zip"),
    ]

    @Test("every other type is unsupported and named", arguments: 0..<others.count)
    func otherTypes(_ index: Int) {
        let (label, bytes, type) = Self.others[index]
        #expect(rejection(bytes) == MediaRejection(.unsupported, "\(type) is not accepted; send PNG, JPEG or GIF"), "\(label)")
    }

    @Test("a file name or claimed type never matters: a PNG with .jpg bytes is judged by bytes")
    func textAndEmpty() {
        #expect(rejection([])?.kind == .unsupported)
        #expect(rejection(Array("hello, world\n".utf8))?.reason.contains("not an image") == true)
        #expect(rejection([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x0A, 0x00] + png.dropFirst(8))?.reason.contains("signature") == true)
    }
}
