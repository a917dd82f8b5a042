import CImageCodecs
#if canImport(Glibc)
import Glibc
#endif

/// What stripping removed, in the upload response's words (`"stripped": ["exif-gps", …]`).
///
/// Ordered as declared: where the photo was taken first, then what else identifies it.
public enum StrippedMetadata: String, Sendable, Codable, CaseIterable, Comparable {
    /// An EXIF GPS IFD (IFD0 tag 0x8825): where the photo was taken.
    case exifGPS = "exif-gps"
    /// EXIF other than Orientation and the GPS pointer (camera serials, dates, maker notes,
    /// the IFD1 thumbnail), or an EXIF block too malformed to read, dropped whole.
    case exif
    /// JPEG APP1 XMP packets, standard and extended, and GIF XMP application extensions.
    case xmp
    /// JPEG APP13 (Photoshop 3.0 image resources, which carry IPTC).
    case iptc
    /// JPEG COM segments and GIF comment extensions.
    case comment
    /// PNG `tEXt`, `zTXt` and `iTXt` chunks.
    case pngText = "png-text"
    /// PNG `tIME` chunks.
    case pngTime = "png-time"
    /// Any other JPEG application segment: APP0 that is neither JFIF nor JFXX, APP1 that is neither
    /// EXIF nor XMP, APP2 that is not ICC (MPF, FlashPix), APP3–APP12 (APP11 holds C2PA/JUMBF)
    /// and APP15; a GIF's application extensions other than looping, and extensions GIF89a does
    /// not define. None of them is needed to show the pixels.
    case applicationSegment = "app-other"
    /// A thumbnail embedded in JFIF or JFXX (APP0), which can show the photo as it was before
    /// it was cropped or edited.
    case thumbnail
    /// Bytes after a JPEG's EOI, a PNG's IEND or a GIF's trailer: MPF secondary images and gain maps (each with
    /// its own EXIF), or anything appended to the file.
    case trailingData = "trailing-data"

    /// Declaration order.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rank < rhs.rank }

    private var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }
}

/// Removes what a photo carries but a push must not leak (docs/configuration.md#the-media-store), without re-encoding a pixel.
///
/// JPEG: segments are walked from SOI to EOI (scan data is skipped over, never decoded); EXIF is
/// reduced to Orientation alone, XMP, APP13, COM and unneeded APPn go; JFIF, ICC profiles, Adobe
/// APP14 and every non-APP marker stay as they were. PNG: `tEXt`/`zTXt`/`iTXt`/`tIME` go, `eXIf`
/// is reduced to Orientation alone (with a fresh CRC), everything else is copied with its CRC
/// unchecked. Bytes after EOI/IEND go. Work is linear in the input and nothing is allocated from
/// a length before that length is checked against the bytes at hand. A structure that cannot be
/// walked (a length past the end, a PNG chunk type that is not letters) is left as it is: the
/// inspector rejects such a file anyway.
public enum MetadataStripper {
    /// Returns the stripped bytes (`bytes` itself when nothing was removed) and what was removed,
    /// sorted and without duplicates.
    public static func strip(_ bytes: [UInt8]) -> (bytes: [UInt8], removed: [StrippedMetadata]) {
        let plan: Plan?
        if isJPEG(bytes) {
            plan = planJPEG(bytes)
        } else if isPNG(bytes) {
            plan = planPNG(bytes)
        } else if isGIF(bytes) {
            return stripGIF(bytes)
        } else {
            plan = nil
        }
        guard let plan, !plan.removed.isEmpty else { return (bytes, []) }
        return (plan.apply(to: bytes), plan.removed.sorted())
    }

    /// The EXIF Orientation (1–8) of a JPEG or PNG, or nil when it has none (or none readable).
    ///
    /// This is the value `strip` keeps: in a JPEG the first EXIF APP1 before the first scan that
    /// holds a valid one, in a PNG the first such `eXIf` chunk.
    public static func orientation(_ bytes: [UInt8]) -> Int? {
        if isJPEG(bytes) {
            var walker = JPEGWalker(bytes: bytes)
            while case .segment(let s) = walker.next(), s.code != 0xDA {
                if s.code == 0xE1, s.payload.count >= 6, starts(bytes, s.payload, with: Magic.exif),
                   let o = summarizeTIFF(bytes, s.payload.lowerBound + 6..<s.payload.upperBound)?.orientation {
                    return o
                }
            }
            return nil
        }
        if isPNG(bytes) {
            var walker = PNGWalker(bytes: bytes)
            while case .chunk(let c) = walker.next() {
                if c.type == .eXIf, let o = summarizeTIFF(bytes, tiffRange(ofEXIf: c.data, in: bytes))?.orientation {
                    return o
                }
                if c.type == .IEND { break }
            }
        }
        return nil
    }

    // MARK: - Formats

    private static func isJPEG(_ b: [UInt8]) -> Bool { b.count >= 2 && b[0] == 0xFF && b[1] == 0xD8 }

    private static func isGIF(_ b: [UInt8]) -> Bool { b.starts(with: Array("GIF87a".utf8)) || b.starts(with: Array("GIF89a".utf8)) }

    /// A GIF without comments, application extensions other than the loop ones, unknown
    /// extensions and what follows its trailer, block by block in C (`rp_gif_strip`): no pixel is
    /// re-encoded. A GIF whose blocks cannot be walked is left as it is (the inspector refuses it).
    private static func stripGIF(_ bytes: [UInt8]) -> (bytes: [UInt8], removed: [StrippedMetadata]) {
        let flags = bytes.withUnsafeBufferPointer { rp_gif_has_metadata($0.baseAddress, $0.count) }
        guard flags != 0 else { return (bytes, []) }
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = bytes.withUnsafeBufferPointer { rp_gif_strip($0.baseAddress, $0.count, &out, &length, &message) }
        guard status == 0, let out else { return (bytes, []) }
        defer { free(out) }
        var removed: Set<StrippedMetadata> = []
        func has(_ flag: rp_gif_metadata) -> Bool { flags & Int32(flag.rawValue) != 0 }
        if has(RP_GIF_META_COMMENT) { removed.insert(.comment) }
        if has(RP_GIF_META_XMP) { removed.insert(.xmp) }
        if has(RP_GIF_META_APPLICATION) || has(RP_GIF_META_UNKNOWN_EXTENSION) { removed.insert(.applicationSegment) }
        if has(RP_GIF_META_TRAILING_DATA) { removed.insert(.trailingData) }
        return (Array(UnsafeBufferPointer(start: out, count: length)), removed.sorted())
    }

    private static func isPNG(_ b: [UInt8]) -> Bool { b.count >= 8 && b[0..<8].elementsEqual(Magic.png) }

    private enum Magic {
        static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        /// "Exif\0"; the sixth byte is padding (0x00, sometimes 0xFF) and the TIFF follows it.
        static let exif: [UInt8] = Array("Exif\0".utf8)
        static let exifWithPadding: [UInt8] = Array("Exif\0\0".utf8)
        static let xmp: [UInt8] = Array("http://ns.adobe.com/xap/1.0/\0".utf8)
        static let xmpExtension: [UInt8] = Array("http://ns.adobe.com/xmp/extension/\0".utf8)
        static let jfif: [UInt8] = Array("JFIF\0".utf8)
        static let jfxx: [UInt8] = Array("JFXX\0".utf8)
        static let icc: [UInt8] = Array("ICC_PROFILE\0".utf8)
        static let adobe: [UInt8] = Array("Adobe".utf8)
    }

    private static func starts(_ b: [UInt8], _ range: Range<Int>, with prefix: [UInt8]) -> Bool {
        range.count >= prefix.count && b[range.lowerBound..<range.lowerBound + prefix.count].elementsEqual(prefix)
    }

    // MARK: - Edits

    /// Ranges of the input to replace, in ascending order, and what their removal took away.
    private struct Plan {
        private var edits: [(range: Range<Int>, replacement: [UInt8])] = []
        private(set) var removed: Set<StrippedMetadata> = []

        mutating func replace(_ range: Range<Int>, with replacement: [UInt8], reporting what: [StrippedMetadata]) {
            edits.append((range, replacement))
            removed.formUnion(what)
        }

        func apply(to input: [UInt8]) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(input.count)
            var at = 0
            for edit in edits {
                out.append(contentsOf: input[at..<edit.range.lowerBound])
                out.append(contentsOf: edit.replacement)
                at = edit.range.upperBound
            }
            out.append(contentsOf: input[at...])
            return out
        }
    }

    // MARK: - JPEG

    private static func planJPEG(_ b: [UInt8]) -> Plan? {
        var plan = Plan()
        var walker = JPEGWalker(bytes: b)
        var orientationKept = false
        while true {
            switch walker.next() {
            case .malformed:
                return nil
            case .end(let end):
                if end < b.count { plan.replace(end..<b.count, with: [], reporting: [.trailingData]) }
                return plan
            case .segment(let s):
                switch action(for: s, in: b) {
                case .keep:
                    break
                case .drop(let what):
                    plan.replace(s.start..<s.end, with: [], reporting: [what])
                case .jfif:
                    // Version, units and densities stay; a thumbnail goes (its size set to 0×0).
                    if s.payload.count > 14 || (s.payload.count == 14 && (b[s.payload.lowerBound + 12] != 0 || b[s.payload.lowerBound + 13] != 0)) {
                        let kept = [0xFF, 0xE0, 0x00, 0x10] + Array(b[s.payload.lowerBound..<s.payload.lowerBound + 12]) + [0, 0]
                        plan.replace(s.start..<s.end, with: kept, reporting: [.thumbnail])
                    }
                case .exif:
                    let summary = s.payload.count >= 6 ? summarizeTIFF(b, s.payload.lowerBound + 6..<s.payload.upperBound) : nil
                    var kept: [UInt8] = []
                    if let summary, let o = summary.orientation, !s.afterScan, !orientationKept {
                        let tiff = minimalTIFF(orientation: o, bigEndian: summary.bigEndian)
                        kept = [0xFF, 0xE1, 0x00, UInt8(2 + 6 + tiff.count)] + Magic.exifWithPadding + tiff
                        orientationKept = true
                    }
                    if !kept.elementsEqual(b[s.marker..<s.end]) {
                        plan.replace(s.start..<s.end, with: kept, reporting: losses(summary))
                    }
                }
            }
        }
    }

    private enum JPEGAction {
        case keep
        case drop(StrippedMetadata)
        case exif
        case jfif
    }

    private static func action(for s: JPEGSegment, in b: [UInt8]) -> JPEGAction {
        func has(_ prefix: [UInt8]) -> Bool { starts(b, s.payload, with: prefix) }
        switch s.code {
        case 0xE0:
            if has(Magic.jfif) { return s.payload.count >= 14 ? .jfif : .keep }
            return has(Magic.jfxx) ? .drop(.thumbnail) : .drop(.applicationSegment)
        case 0xE1:
            if has(Magic.exif) { return .exif }
            return has(Magic.xmp) || has(Magic.xmpExtension) ? .drop(.xmp) : .drop(.applicationSegment)
        case 0xE2: return has(Magic.icc) ? .keep : .drop(.applicationSegment)
        case 0xED: return .drop(.iptc)
        case 0xEE: return has(Magic.adobe) ? .keep : .drop(.applicationSegment)
        case 0xE3...0xEC, 0xEF: return .drop(.applicationSegment)
        case 0xFE: return .drop(.comment)
        default: return .keep
        }
    }

    /// One marker and its payload; `start` includes any fill bytes before the marker.
    private struct JPEGSegment {
        var start: Int
        /// Offset of the marker's 0xFF.
        var marker: Int
        var code: UInt8
        var payload: Range<Int>
        /// True when a scan (SOS) came before this segment.
        var afterScan: Bool
        var end: Int { payload.upperBound }
    }

    /// Walks a JPEG's markers from after SOI to EOI, stepping over entropy-coded data by its
    /// byte stuffing (every 0xFF there is followed by 0x00 or RSTn) without decoding it.
    private struct JPEGWalker {
        enum Step {
            case segment(JPEGSegment)
            /// Offset just past EOI, or the input's end when it ran out without one.
            case end(Int)
            case malformed
        }

        let bytes: [UInt8]
        private var position = 2
        private var inScan = false
        private var seenScan = false

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func next() -> Step {
            let n = bytes.count
            if inScan {
                position = Self.entropyEnd(bytes, from: position)
                inScan = false
            }
            guard position < n else { return .end(n) }
            let start = position
            guard bytes[start] == 0xFF else { return .malformed }
            var at = start
            while at + 1 < n, bytes[at + 1] == 0xFF { at += 1 }
            guard at + 1 < n else { return .malformed }
            let code = bytes[at + 1]
            switch code {
            case 0x00:
                return .malformed
            case 0xD9:
                return .end(at + 2)
            case 0x01, 0xD0...0xD8:
                position = at + 2
                return .segment(JPEGSegment(start: start, marker: at, code: code, payload: position..<position, afterScan: seenScan))
            default:
                guard at + 4 <= n else { return .malformed }
                let length = Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
                guard length >= 2, length <= n - at - 2 else { return .malformed }
                position = at + 2 + length
                let segment = JPEGSegment(start: start, marker: at, code: code, payload: at + 4..<position, afterScan: seenScan)
                if code == 0xDA {
                    inScan = true
                    seenScan = true
                }
                return .segment(segment)
            }
        }

        /// The offset of the first 0xFF that begins a marker (not stuffing, not RSTn) at or after
        /// `from`, or the input's end.
        private static func entropyEnd(_ bytes: [UInt8], from: Int) -> Int {
            bytes.withUnsafeBufferPointer { b in
                let n = b.count
                var p = from
                while p < n {
                    if b[p] != 0xFF {
                        p += 1
                        continue
                    }
                    guard p + 1 < n else { return n }
                    let next = b[p + 1]
                    if next == 0x00 || (0xD0...0xD7).contains(next) {
                        p += 2
                    } else {
                        return p
                    }
                }
                return n
            }
        }
    }

    // MARK: - PNG

    private static func planPNG(_ b: [UInt8]) -> Plan? {
        var plan = Plan()
        var walker = PNGWalker(bytes: b)
        var orientationKept = false
        while true {
            switch walker.next() {
            case .malformed:
                return nil
            case .end:
                return plan
            case .chunk(let c):
                switch c.type {
                case .IEND:
                    if c.end < b.count { plan.replace(c.end..<b.count, with: [], reporting: [.trailingData]) }
                    return plan
                case .tEXt, .zTXt, .iTXt:
                    plan.replace(c.start..<c.end, with: [], reporting: [.pngText])
                case .tIME:
                    plan.replace(c.start..<c.end, with: [], reporting: [.pngTime])
                case .eXIf:
                    let summary = summarizeTIFF(b, tiffRange(ofEXIf: c.data, in: b))
                    var kept: [UInt8] = []
                    if let summary, let o = summary.orientation, !orientationKept {
                        kept = pngChunk(PNGChunkType.eXIf.bytes, minimalTIFF(orientation: o, bigEndian: summary.bigEndian))
                        orientationKept = true
                    }
                    if !kept.elementsEqual(b[c.start..<c.end]) {
                        plan.replace(c.start..<c.end, with: kept, reporting: losses(summary))
                    }
                default:
                    break
                }
            }
        }
    }

    /// A PNG chunk type as its four bytes, big-endian.
    private struct PNGChunkType: Equatable {
        var raw: UInt32

        static let IEND = Self("IEND")
        static let tEXt = Self("tEXt")
        static let zTXt = Self("zTXt")
        static let iTXt = Self("iTXt")
        static let tIME = Self("tIME")
        static let eXIf = Self("eXIf")

        init(raw: UInt32) { self.raw = raw }

        private init(_ name: StaticString) {
            raw = name.withUTF8Buffer { utf8 in utf8.reduce(0) { partial, byte in partial << 8 | UInt32(byte) } }
        }

        var bytes: [UInt8] { [UInt8(raw >> 24), UInt8(raw >> 16 & 0xFF), UInt8(raw >> 8 & 0xFF), UInt8(raw & 0xFF)] }
    }

    private struct PNGChunk {
        /// Offset of the length field.
        var start: Int
        var type: PNGChunkType
        var data: Range<Int>
        /// Offset just past the CRC.
        var end: Int { data.upperBound + 4 }
    }

    /// Walks a PNG's chunks after the signature, checking each length against the bytes at hand.
    private struct PNGWalker {
        enum Step {
            case chunk(PNGChunk)
            /// The input ended on a chunk boundary without IEND.
            case end
            case malformed
        }

        let bytes: [UInt8]
        private var position = 8

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func next() -> Step {
            let n = bytes.count
            let i = position
            guard i < n else { return .end }
            guard n - i >= 12 else { return .malformed }
            let length = Int(be32(bytes, i))
            guard length <= 0x7FFF_FFFF, length <= n - i - 12 else { return .malformed }
            for k in i + 4..<i + 8 {
                let c = bytes[k]
                guard (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c) else { return .malformed }
            }
            let chunk = PNGChunk(start: i, type: PNGChunkType(raw: be32(bytes, i + 4)), data: i + 8..<i + 8 + length)
            position = chunk.end
            return .chunk(chunk)
        }
    }

    private static func be32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    /// The TIFF inside an `eXIf` chunk; tolerates writers that put JPEG's "Exif\0\0" in front.
    private static func tiffRange(ofEXIf data: Range<Int>, in b: [UInt8]) -> Range<Int> {
        starts(b, data, with: Magic.exifWithPadding) ? data.lowerBound + 6..<data.upperBound : data
    }

    private static func pngChunk(_ type: [UInt8], _ data: [UInt8]) -> [UInt8] {
        let n = UInt32(data.count)
        let crc = crc32(type + data)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + type + data
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
    }

    /// CRC-32 (ISO 3309, as PNG uses it), bit by bit: it only ever covers a 30-byte chunk here.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (0xEDB8_8320 & (0 &- (crc & 1))) }
        }
        return ~crc
    }

    // MARK: - EXIF (TIFF)

    /// What IFD0 of an EXIF TIFF holds, as far as stripping cares.
    private struct TIFFSummary {
        var bigEndian: Bool
        /// A SHORT Orientation of 1–8; any other Orientation counts as `other`.
        var orientation: Int?
        /// IFD0 points to a GPS IFD.
        var gps = false
        /// IFD0 has other entries, or links to IFD1 (the thumbnail).
        var other = false
    }

    /// More IFD0 entries than any camera writes; beyond it the block is treated as malformed.
    static let maximumIFDEntries = 1000

    /// Reads IFD0 of the TIFF in `range`, or nil when the header or IFD0 does not fit in it.
    private static func summarizeTIFF(_ b: [UInt8], _ range: Range<Int>) -> TIFFSummary? {
        let base = range.lowerBound
        let count = range.count
        guard count >= 8 else { return nil }
        let bigEndian: Bool
        switch (b[base], b[base + 1]) {
        case (0x49, 0x49): bigEndian = false
        case (0x4D, 0x4D): bigEndian = true
        default: return nil
        }
        func u16(_ o: Int) -> Int {
            bigEndian ? Int(b[base + o]) << 8 | Int(b[base + o + 1]) : Int(b[base + o + 1]) << 8 | Int(b[base + o])
        }
        func u32(_ o: Int) -> Int { bigEndian ? u16(o) << 16 | u16(o + 2) : u16(o + 2) << 16 | u16(o) }
        guard u16(2) == 42 else { return nil }
        let ifd = u32(4)
        guard ifd >= 8, ifd <= count - 2 else { return nil }
        let entries = u16(ifd)
        guard entries <= maximumIFDEntries, entries * 12 <= count - ifd - 2 else { return nil }
        var summary = TIFFSummary(bigEndian: bigEndian)
        for k in 0..<entries {
            let e = ifd + 2 + k * 12
            switch u16(e) {
            case 0x0112 where summary.orientation == nil && u16(e + 2) == 3 && u32(e + 4) == 1 && (1...8).contains(u16(e + 8)):
                summary.orientation = u16(e + 8)
            case 0x8825:
                summary.gps = true
            default:
                summary.other = true
            }
        }
        let next = ifd + 2 + entries * 12
        if count - next < 4 || u32(next) != 0 { summary.other = true }
        return summary
    }

    /// A TIFF of one IFD holding Orientation alone, next-IFD offset 0: 26 bytes.
    private static func minimalTIFF(orientation: Int, bigEndian: Bool) -> [UInt8] {
        let o = UInt8(orientation)
        if bigEndian {
            return [0x4D, 0x4D, 0x00, 0x2A, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, o, 0, 0, 0, 0, 0, 0]
        }
        return [0x49, 0x49, 0x2A, 0x00, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, o, 0, 0, 0, 0, 0, 0, 0]
    }

    /// What replacing an EXIF block took away: the GPS IFD, and `exif` for anything else
    /// (including a block that could not be read, or one that only changed layout).
    private static func losses(_ summary: TIFFSummary?) -> [StrippedMetadata] {
        guard let summary, summary.gps else { return [.exif] }
        return summary.other ? [.exifGPS, .exif] : [.exifGPS]
    }
}
