import Foundation
import MediaStore

/// Hostile images made for the tests: each within the upload limits (10 MiB, 40 MP), each built
/// to cost as much work or memory as its kind can. Any verdict is fine for them; what matters is
/// that each is settled quickly and within a bounded amount of memory.
public enum Bombs {
    static func noise(count: Int) -> [UInt8] {
        var state: UInt64 = 0x9E3779B97F4A7C15
        return (0..<count).map { _ in
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    /// A JPEG's marker segments; a scan keeps its entropy-coded data.
    public static func jpegSegments(_ jpeg: [UInt8]) -> [[UInt8]] {
        var segments: [[UInt8]] = [[0xFF, 0xD8]]
        var i = 2
        while i + 4 <= jpeg.count {
            let marker = jpeg[i + 1]
            if marker == 0xD9 { segments.append([0xFF, 0xD9]); break }
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            var end = i + 2 + length
            if marker == 0xDA {
                while end + 1 < jpeg.count, !(jpeg[end] == 0xFF && jpeg[end + 1] != 0x00 && !(0xD0...0xD7).contains(jpeg[end + 1])) { end += 1 }
            }
            segments.append(Array(jpeg[i..<end]))
            i = end
        }
        return segments
    }

    /// Sets a baseline or progressive JPEG's declared height and width.
    static func declare(_ jpeg: inout [UInt8], height: UInt16, width: UInt16) {
        guard let sof = jpeg.indices.first(where: { jpeg[$0] == 0xFF && (jpeg[$0 + 1] == 0xC0 || jpeg[$0 + 1] == 0xC2) }) else { return }
        jpeg[sof + 5] = UInt8(height >> 8); jpeg[sof + 6] = UInt8(height & 0xFF)
        jpeg[sof + 7] = UInt8(width >> 8); jpeg[sof + 8] = UInt8(width & 0xFF)
    }

    /// Every kind, named.
    public static func all() throws -> [(name: String, bytes: [UInt8])] {
        let flat = try JPEGEncoder.encode(pixels: [UInt8](repeating: 128, count: 512 * 512 * 3), width: 512, height: 512, components: 3, progressive: true)
        var segments = jpegSegments(flat)
        let eoi = segments.removeLast()
        let lastScan = segments.last { $0[1] == 0xDA } ?? []
        var scans = segments.flatMap { $0 }
        for _ in 0..<20_000 { scans += lastScan }
        scans += eoi
        declare(&scans, height: 6_000, width: 6_000)

        var coefficients = try JPEGEncoder.encode(pixels: noise(count: 256 * 256 * 3), width: 256, height: 256, components: 3, progressive: true)
        declare(&coefficients, height: 2_400, width: 16_000)

        let base = PNGBuilder.chunks(PNGBuilder.rgb(width: 16, height: 16, seed: 9))
        let text = Array("Comment".utf8) + [0, 0] + PNGBuilder.zlibZeros(count: 8 << 20)
        let ztxt = PNGBuilder.assemble([base[0]] + Array(repeating: (type: "zTXt", data: text), count: 150) + base.dropFirst())
        let iccp = PNGBuilder.assemble([base[0], (type: "iCCP", data: Array("icc".utf8) + [0, 0] + PNGBuilder.zlibZeros(count: 32 << 20))] + base.dropFirst())
        let side = 6_000
        let zeros = PNGBuilder.signature + PNGBuilder.chunk("IHDR", PNGBuilder.ihdr(width: UInt32(side), height: UInt32(side)))
            + PNGBuilder.chunk("IDAT", PNGBuilder.zlibZeros(count: (1 + side * 3) * side)) + PNGBuilder.chunk("IEND", [])
        // GIFs (docs/api.md#options-badges-and-paced-sends): a 36-megapixel canvas with 4,999 one-pixel frames (one under the frame
        // limit, each its own extension and descriptor), and a frame of one pixel behind 600,000
        // clear codes.
        let dot = GIFBuilder.Frame.pattern(width: 1, height: 1)
        let frames = GIFBuilder.gif(width: side, height: side, frames: Array(repeating: dot, count: 4_999))
        let flood = GIFBuilder.gif(width: 1, height: 1, frames: []).dropLast()
            + GIFBuilder.image(dot, data: GIFBuilder.codes(Array(repeating: 256, count: 600_000) + [0, 257])) + [0x3B]
        return [("jpeg-repeated-scans.jpg", scans), ("jpeg-coefficients.jpg", coefficients), ("png-ztxt.png", ztxt),
                ("png-iccp.png", iccp), ("png-zeros-36mp.png", zeros), ("gif-36mp-4999-frames.gif", frames),
                ("gif-clear-flood.gif", Array(flood))]
    }
}
