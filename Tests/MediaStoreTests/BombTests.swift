import Foundation
import MediaStore
import RichPushTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// CPU seconds this thread spent in `body`: the bound a hostile file must stay within is work,
/// which a busy machine does not inflate as it inflates wall time.
func cpuSeconds(_ body: () -> Void) -> Double {
    var start = timespec(), end = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
    body()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
    return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
}

@Suite("Decoder bombs: each settled within a second of CPU, whatever the verdict")
struct BombTests {
    static func noise(width: Int, height: Int, components: Int) -> [UInt8] {
        var state: UInt64 = 0x9E3779B97F4A7C15
        return (0..<(width * height * components)).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    let progressive = try! JPEGEncoder.encode(pixels: noise(width: 512, height: 512, components: 3), width: 512, height: 512,
                                              components: 3, progressive: true)

    @Test("a progressive JPEG from libjpeg is accepted (the scan limit leaves real files alone)")
    func realProgressive() throws {
        let info = try ImageInspector.inspect(progressive, limits: .default)
        #expect(info.interlaced && info.width == 512)
        #expect(Bombs.jpegSegments(progressive).filter { $0[1] == 0xDA }.count > 5)
    }

    @Test("a progressive JPEG whose last scan is repeated 20,000 times", arguments: [false, true])
    func repeatedScans(asBigImage: Bool) throws {
        // A flat image: each scan is a few bytes, so 20,000 of them fit in well under the size limit.
        let flat = try JPEGEncoder.encode(pixels: [UInt8](repeating: 128, count: 512 * 512 * 3), width: 512, height: 512,
                                          components: 3, progressive: true)
        var segments = Bombs.jpegSegments(flat)
        let eoi = segments.removeLast()
        let lastScan = try #require(segments.last { $0[1] == 0xDA })
        var bomb = segments.flatMap { $0 }
        for _ in 0..<20_000 { bomb += lastScan }
        bomb += eoi
        #expect(bomb.count < 10 << 20)
        if asBigImage { // the same scans declared over 6,000 × 6,000 pixels
            let sof = try #require(bomb.indices.first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC2 })
            bomb[sof + 5] = 0x17; bomb[sof + 6] = 0x70; bomb[sof + 7] = 0x17; bomb[sof + 8] = 0x70
        }
        var verdict: MediaRejection?
        let seconds = cpuSeconds { verdict = rejection(bomb) }
        #expect(verdict?.kind == .corrupt)
        #expect(seconds < 1, "\(seconds) s")
    }

    @Test("a progressive JPEG declaring 16,000 × 2,400 pixels (coefficients of 230 MB, over the 192 MB cap) is refused quickly")
    func coefficientMemory() throws {
        var bomb = progressive
        let sof = try #require(bomb.indices.first { bomb[$0] == 0xFF && bomb[$0 + 1] == 0xC2 })
        // height 2400 (0x0960), width 16000 (0x3E80): 38.4 MP, within the pixel limit
        bomb[sof + 5] = 0x09; bomb[sof + 6] = 0x60; bomb[sof + 7] = 0x3E; bomb[sof + 8] = 0x80
        var verdict: MediaRejection?
        let seconds = cpuSeconds { verdict = rejection(bomb) }
        #expect(verdict?.kind == .corrupt)
        #expect(seconds < 1, "\(seconds) s")
    }

    @Test("a JPEG with 2 components is unsupported, not decoded")
    func twoComponents() throws {
        let two = try JPEGEncoder.encode(pixels: Self.noise(width: 64, height: 64, components: 2), width: 64, height: 64, components: 2)
        #expect(rejection(two)?.kind == .unsupported)
        #expect(rejection(two)?.reason.contains("2 components") == true)
    }

    @Test("a PNG with 150 zTXt chunks each inflating to 8 MiB is settled without inflating them")
    func textBomb() throws {
        let base = PNGBuilder.chunks(PNGBuilder.rgb(width: 16, height: 16, seed: 9))
        let text = Array("Comment".utf8) + [0, 0] + PNGBuilder.zlibZeros(count: 8 << 20)
        var chunks = [base[0]]
        for _ in 0..<150 { chunks.append((type: "zTXt", data: text)) }
        chunks += base.dropFirst()
        let bomb = PNGBuilder.assemble(chunks)
        #expect(bomb.count < 10 << 20)
        var info: ImageInfo?
        let seconds = cpuSeconds { info = try? ImageInspector.inspect(bomb, limits: .default) }
        #expect(info?.width == 16)
        #expect(seconds < 1, "\(seconds) s")
    }

    @Test("a damaged 1-megapixel JPEG is refused quickly")
    func firstWarning() throws {
        var damaged = try JPEGEncoder.encode(pixels: Self.noise(width: 1024, height: 1024, components: 3), width: 1024, height: 1024, components: 3)
        // Zero a run in the middle of the entropy-coded data: libjpeg warns and would resync for every MCU after it.
        for i in (damaged.count / 3)..<(damaged.count / 3 + 4096) where damaged[i] != 0xFF { damaged[i] = 0 }
        var verdict: MediaRejection?
        let seconds = cpuSeconds { verdict = rejection(damaged) }
        #expect(verdict?.kind == .corrupt || verdict == nil)
        #expect(seconds < 1, "\(seconds) s")
    }

    @Test("PNG bombs: a huge all-zero image, an iCCP that inflates past 8 MiB, a thousand tiny IDATs, 5,000 unknown chunks", arguments: [0, 1, 2, 3])
    func pngBombs(kind: Int) throws {
        var bomb: [UInt8]
        switch kind {
        case 0: // 6,000 x 6,000 RGB of zeros: 108 MB of pixels from a few hundred kB (within the limits: a real, if dull, image)
            let side = 6_000, row = 1 + side * 3
            bomb = PNGBuilder.signature + PNGBuilder.chunk("IHDR", PNGBuilder.ihdr(width: UInt32(side), height: UInt32(side)))
                + PNGBuilder.chunk("IDAT", PNGBuilder.zlibZeros(count: row * side)) + PNGBuilder.chunk("IEND", [])
        case 1: // an ICC profile inflating to 32 MiB
            let base = PNGBuilder.chunks(PNGBuilder.rgb(width: 8, height: 8, seed: 2))
            bomb = PNGBuilder.assemble([base[0], (type: "iCCP", data: Array("icc".utf8) + [0, 0] + PNGBuilder.zlibZeros(count: 32 << 20))] + base.dropFirst())
        case 2: // the pixel data split into 1,000 IDAT chunks of a few bytes
            let chunks = PNGBuilder.chunks(PNGBuilder.rgb(width: 64, height: 64, seed: 3))
            let data = chunks.filter { $0.type == "IDAT" }.flatMap(\.data)
            let size = max(1, data.count / 1_000)
            let idats = stride(from: 0, to: data.count, by: size).map { (type: "IDAT", data: Array(data[$0..<min($0 + size, data.count)])) }
            bomb = PNGBuilder.assemble([chunks[0]] + idats + [(type: "IEND", data: [])])
        default: // 5,000 private ancillary chunks before the image data
            let base = PNGBuilder.chunks(PNGBuilder.rgb(width: 8, height: 8, seed: 4))
            bomb = PNGBuilder.assemble([base[0]] + Array(repeating: (type: "prVt", data: [UInt8](repeating: 7, count: 100)), count: 5_000) + base.dropFirst())
        }
        #expect(bomb.count < 10 << 20)
        var outcome = "none"
        let seconds = cpuSeconds {
            do { outcome = try ImageInspector.inspect(bomb, limits: .default).contentType } catch { outcome = "\(error)" }
        }
        #expect(seconds < 1, "\(seconds) s, verdict \(outcome)")
    }

    @Test("the fuzzer's find: a 92-byte PNG whose chunk declares 1.9 GB past the file's end is refused before libpng allocates it")
    func chunkLengthPastEnd() throws {
        let crash = Fixtures.packageRoot.appendingPathComponent("fuzz/crashes/oom-0d170ea650efbf60247dae6fe9867bee0ba19bd7")
        let bytes = try Fixtures.bytes(crash)
        #expect(bytes.count == 92)
        let verdict = rejection(bytes)
        #expect(verdict?.kind == .corrupt)
        #expect(verdict?.reason.contains("past the end") == true, "\(verdict?.reason ?? "accepted")")
    }
}
