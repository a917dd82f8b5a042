/// Writes GIFs for tests, byte by byte: frames with any palette indices, the loop extension,
/// comments, application extensions, trailing bytes, and the hostile shapes a fuzzer would try
/// (clear-code floods, undefined codes, cut frames). Its LZW never grows the dictionary: every
/// code is a literal and a clear code comes before the dictionary would widen the codes, so
/// what it writes decodes to exactly the indices given, in any decoder.
public enum GIFBuilder {
    /// One image of an animation: where it is on the canvas, and its palette indices row by row.
    public struct Frame: Sendable {
        public var left: Int, top: Int, width: Int, height: Int
        public var indices: [UInt8]
        /// Hundredths of a second.
        public var delay: Int
        public var transparent: UInt8?

        /// A frame of `width`×`height` at (`left`, `top`).
        public init(left: Int = 0, top: Int = 0, width: Int, height: Int, indices: [UInt8], delay: Int = 10, transparent: UInt8? = nil) {
            self.left = left; self.top = top; self.width = width; self.height = height
            self.indices = indices; self.delay = delay; self.transparent = transparent
        }

        /// A frame filled with a pattern of the first `colors` indices, shifted by `seed`.
        public static func pattern(width: Int, height: Int, colors: Int = 4, seed: Int = 0) -> Frame {
            Frame(width: width, height: height, indices: (0..<(width * height)).map { UInt8((($0 % width) / 4 + ($0 / width) / 4 + seed) % colors) })
        }
    }

    /// The LZW code size: 8 bits, so any index of a 256-color palette is a literal.
    static let minCodeSize = 8

    /// A GIF89a of a `width`×`height` canvas with a 4-color global palette (black, white, red,
    /// blue), `frames`, and optionally the loop extension, a comment, an XMP packet, an ICC
    /// application extension and bytes after the trailer.
    public static func gif(width: Int, height: Int, frames: [Frame], loop: Bool = true, comment: String? = nil, xmp: Bool = false,
                           icc: Bool = false, trailing: [UInt8] = []) -> [UInt8] {
        var out = Array("GIF89a".utf8)
        out += le16(width) + le16(height)
        out += [0xF1, 0, 0] // global color table, 2 bits of color resolution, 4 entries
        out += [0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 255]
        if loop { out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1, 0, 0, 0] }
        if let comment { out += [0x21, 0xFE] + subBlocks(Array(comment.utf8)) }
        if xmp { out += [0x21, 0xFF, 11] + Array("XMP DataXMP".utf8) + subBlocks(Array("<x:xmpmeta>GPS 48.85 2.35</x:xmpmeta>".utf8)) }
        if icc { out += [0x21, 0xFF, 11] + Array("ICCRGBG1012".utf8) + subBlocks([UInt8](repeating: 7, count: 40)) }
        for frame in frames { out += image(frame) }
        return out + [0x3B] + trailing
    }

    /// A frame's graphic control extension, descriptor and data.
    public static func image(_ frame: Frame, data: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [0x21, 0xF9, 4, frame.transparent == nil ? 0x04 : 0x05] + le16(frame.delay) + [frame.transparent ?? 0, 0]
        out += [0x2C] + le16(frame.left) + le16(frame.top) + le16(frame.width) + le16(frame.height) + [0]
        return out + [UInt8(minCodeSize)] + subBlocks(data ?? codes(literals(frame.indices)))
    }

    /// Codes for `indices` as literals, with a clear code before the dictionary would widen them.
    public static func literals(_ indices: [UInt8]) -> [Int] {
        let clear = 1 << minCodeSize
        let perClear = clear - 2 // entries added stay below the next code width, early change or not
        var codes: [Int] = []
        for (i, index) in indices.enumerated() {
            if i % perClear == 0 { codes.append(clear) }
            codes.append(Int(index))
        }
        return codes + [clear + 1] // end of information
    }

    /// `codes` packed least significant bit first at `minCodeSize + 1` bits each.
    public static func codes(_ codes: [Int]) -> [UInt8] {
        let width = minCodeSize + 1
        var out: [UInt8] = [], accumulator = 0, bits = 0
        for code in codes {
            accumulator |= code << bits
            bits += width
            while bits >= 8 { out.append(UInt8(accumulator & 0xFF)); accumulator >>= 8; bits -= 8 }
        }
        if bits > 0 { out.append(UInt8(accumulator & 0xFF)) }
        return out
    }

    /// `data` as GIF sub-blocks of at most 255 bytes, then the terminator.
    public static func subBlocks(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < data.count {
            let n = min(255, data.count - index)
            out.append(UInt8(n))
            out += data[index..<(index + n)]
            index += n
        }
        return out + [0]
    }

    static func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF)] }
}
