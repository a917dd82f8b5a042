import CImageCodecs

#if canImport(Glibc)
import Glibc
#endif

/// The images made from a stored one for push (docs/configuration.md#the-media-store).
public enum MediaVariant: String, Sendable, CaseIterable, Codable {
    /// Fits 320×320: a browser's notification icon, a console's grid. A JPEG from a JPEG, a PNG
    /// (alpha kept) from a PNG. Never larger than its source (issue #49): when the made one would
    /// be, the source itself is the thumb (unless it must be turned to show upright).
    case thumb
    /// A baseline JPEG of at most 1 MB and 2048 px on its long side: FCM's image limit, and small
    /// enough for a Notification Service Extension's 24 MB. A GIF's stays an animated GIF of at
    /// most 10 MB (`maxGIFBytes`), and its thumb is its first frame as a PNG.
    case push

    /// The box the variant fits in.
    public var box: Int { self == .thumb ? 320 : 2048 }
    /// The most bytes it may have (push only).
    public var maxBytes: Int? { self == .push ? 1_048_576 : nil }
    /// The most bytes a GIF's push variant may have: iOS's limit for an animated attachment (docs/api.md#options-badges-and-paced-sends).
    public static let maxGIFBytes = 10 * 1_048_576
}

/// Makes variants: a scaled decode (libjpeg's DCT scaling for JPEG), a Lanczos-3 resample, the
/// EXIF orientation applied to the pixels (so that viewers that ignore EXIF, as Android's
/// notification does, show it upright too), and a baseline JPEG or a PNG written by libjpeg or
/// libpng. Deterministic: the same source gives the same bytes, so concurrent makers on
/// different nodes store one blob.
public enum VariantMaker {
    /// The variant of `source` (a validated, stored image), or nil when the source itself is
    /// already that variant (it fits, needs no turning, and has the right format and size), or,
    /// for `thumb`, when the made one would not be smaller than the source.
    public static func make(_ kind: MediaVariant, of source: [UInt8], info: ImageInfo) throws -> [UInt8]? {
        if info.contentType == "image/gif" { return try makeGIF(kind, of: source) }
        let orientation = MetadataStripper.orientation(source) ?? 1
        let fits = info.width <= kind.box && info.height <= kind.box
        let isJPEG = info.contentType == "image/jpeg"
        switch kind {
        case .thumb where fits && orientation == 1:
            return nil
        case .push where fits && orientation == 1 && isJPEG && source.count <= kind.maxBytes! && isPlainJPEG(source, info: info):
            return nil
        default:
            break
        }
        var pixels = try decode(source, fittingIn: kind.box)
        if orientation != 1 { pixels = pixels.oriented(orientation) }
        switch kind {
        case .thumb:
            let thumb = isJPEG ? try JPEGEncoder.encode(pixels: pixels.bytes, width: pixels.width, height: pixels.height, components: pixels.components,
                                                         quality: 80, icc: pixels.icc)
                               : try pixels.opaqueDropped().png()
            // A thumb is for its smallness: one that weighs as much as the source is the source
            // (a small, highly compressed photo just over 320 px), served as what it is. A source
            // that must be turned keeps its made thumb: Android's icon ignores EXIF.
            return orientation == 1 ? smaller(thumb, than: source) : thumb
        case .push:
            let rgb = pixels.flattened()
            // Quality first, then size, until it fits in a megabyte; 2048 px at quality 85 almost always does.
            var current = rgb
            for quality in [85, 75, 65] {
                let jpeg = try JPEGEncoder.encode(pixels: current.bytes, width: current.width, height: current.height, components: 3, quality: quality,
                                                  icc: current.icc)
                if jpeg.count <= kind.maxBytes! { return jpeg }
            }
            while current.width > 64 && current.height > 64 {
                current = try rgb.resized(width: max(1, current.width * 3 / 4), height: max(1, current.height * 3 / 4))
                let jpeg = try JPEGEncoder.encode(pixels: current.bytes, width: current.width, height: current.height, components: 3, quality: 65,
                                                  icc: current.icc)
                if jpeg.count <= kind.maxBytes! { return jpeg }
            }
            throw MediaStoreError.encode("the push variant does not fit in \(kind.maxBytes!) bytes")
        }
    }

    /// docs/api.md#options-badges-and-paced-sends: a GIF's thumb is its first frame as a PNG (fitting 320×320; the GIF itself when that PNG would not be smaller); its push variant
    /// stays an animated GIF, fitting 2048×2048 and 10 MB (nil when the source already does).
    static func makeGIF(_ kind: MediaVariant, of source: [UInt8]) throws -> [UInt8]? {
        var message = [CChar](repeating: 0, count: 256)
        switch kind {
        case .thumb:
            var frame = rp_pixels()
            let status = source.withUnsafeBufferPointer { rp_gif_first_frame($0.baseAddress, $0.count, UInt32(kind.box), &frame, &message) }
            guard status == 0, let base = frame.pixels else { throw MediaStoreError.encode(cString(message)) }
            defer { free(base); free(frame.icc) }
            let count = Int(frame.width) * Int(frame.height) * Int(frame.components)
            let thumb = try Pixels(bytes: Array(UnsafeBufferPointer(start: base, count: count)), width: Int(frame.width), height: Int(frame.height),
                                   components: Int(frame.components)).opaqueDropped().png()
            return smaller(thumb, than: source)
        case .push:
            var out: UnsafeMutablePointer<UInt8>?
            var length = 0
            let status = source.withUnsafeBufferPointer {
                rp_gif_fit($0.baseAddress, $0.count, UInt32(kind.box), MediaVariant.maxGIFBytes, &out, &length, &message)
            }
            guard status == 0 else { throw MediaStoreError.encode(cString(message)) }
            guard let out else { return nil }
            defer { free(out) }
            return Array(UnsafeBufferPointer(start: out, count: length))
        }
    }

    /// `made`, unless it is not smaller than `source`: then nil, the source is its own variant.
    static func smaller(_ made: [UInt8], than source: [UInt8]) -> [UInt8]? {
        made.count < source.count ? made : nil
    }

    /// A C library's message buffer as a string.
    static func cString(_ message: [CChar]) -> String {
        String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A JPEG any decoder shows as it is: baseline or extended Huffman (not progressive, not
    /// arithmetic-coded), YCbCr or gray (not CMYK).
    static func isPlainJPEG(_ bytes: [UInt8], info: ImageInfo) -> Bool {
        guard !info.interlaced, info.colorModel == "ycbcr" || info.colorModel == "gray" else { return false }
        var i = 2
        while i + 4 <= bytes.count, bytes[i] == 0xFF {
            let marker = bytes[i + 1]
            if marker == 0xFF { i += 1; continue }
            if marker == 0xC0 || marker == 0xC1 { return true }
            if (0xC2...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC { return false }
            if marker == 0xDA || marker == 0xD9 { return false }
            i += 2 + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
        }
        return false
    }

    /// `source` decoded (at `box` 0, full size) and resampled to fit `box`×`box`.
    static func decode(_ source: [UInt8], fittingIn box: Int) throws -> Pixels {
        var out = rp_pixels()
        var message = [CChar](repeating: 0, count: 256)
        let status = source.withUnsafeBufferPointer { rp_decode_fitted($0.baseAddress, $0.count, UInt32(box), &out, &message) }
        guard status == 0, let base = out.pixels else { throw MediaStoreError.encode(cString(message)) }
        defer { free(base); free(out.icc) }
        let count = Int(out.width) * Int(out.height) * Int(out.components)
        // The colours mean what the source's profile says (a phone's Display P3 photo): it goes along.
        let icc = out.icc.map { Array(UnsafeBufferPointer(start: $0, count: out.icc_length)) }
        return Pixels(bytes: Array(UnsafeBufferPointer(start: base, count: count)), width: Int(out.width), height: Int(out.height),
                      components: Int(out.components), icc: icc)
    }
}

/// 8-bit pixels, row after row.
struct Pixels {
    var bytes: [UInt8]
    var width: Int
    var height: Int
    var components: Int
    /// The ICC profile the pixels are in, when the source had one.
    var icc: [UInt8]? = nil

    func resized(width: Int, height: Int) throws -> Pixels {
        var out = [UInt8](repeating: 0, count: width * height * components)
        let status = bytes.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                rp_resize(source.baseAddress, UInt32(self.width), UInt32(self.height), Int32(components), target.baseAddress,
                          UInt32(width), UInt32(height))
            }
        }
        guard status == 0 else { throw MediaStoreError.encode("out of memory resizing to \(width)x\(height)") }
        return Pixels(bytes: out, width: width, height: height, components: components, icc: icc)
    }

    /// Turned as EXIF `orientation` (2–8) says, so it shows upright with no tag.
    func oriented(_ orientation: Int) -> Pixels {
        var out = [UInt8](repeating: 0, count: bytes.count)
        bytes.withUnsafeBufferPointer { source in
            out.withUnsafeMutableBufferPointer { target in
                rp_orient(source.baseAddress, UInt32(width), UInt32(height), Int32(components), Int32(orientation), target.baseAddress)
            }
        }
        let swapped = (5...8).contains(orientation)
        return Pixels(bytes: out, width: swapped ? height : width, height: swapped ? width : height, components: components, icc: icc)
    }

    /// RGB, any alpha composited over white (a JPEG has none).
    func flattened() -> Pixels {
        guard components == 4 else { return self }
        var out = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) {
            let alpha = Int(bytes[i * 4 + 3])
            for c in 0..<3 { out[i * 3 + c] = UInt8((Int(bytes[i * 4 + c]) * alpha + 255 * (255 - alpha) + 127) / 255) }
        }
        return Pixels(bytes: out, width: width, height: height, components: 3, icc: icc)
    }

    /// RGB when every pixel is opaque, else as it is.
    func opaqueDropped() -> Pixels {
        guard components == 4 else { return self }
        for i in 0..<(width * height) where bytes[i * 4 + 3] != 255 { return self }
        var out = [UInt8](repeating: 0, count: width * height * 3)
        for i in 0..<(width * height) { out[i * 3] = bytes[i * 4]; out[i * 3 + 1] = bytes[i * 4 + 1]; out[i * 3 + 2] = bytes[i * 4 + 2] }
        return Pixels(bytes: out, width: width, height: height, components: 3, icc: icc)
    }

    func png() throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = bytes.withUnsafeBufferPointer { buffer in
            (icc ?? []).withUnsafeBufferPointer { profile in
                rp_png_encode(buffer.baseAddress, UInt32(width), UInt32(height), Int32(components), icc == nil ? nil : profile.baseAddress,
                              icc?.count ?? 0, &out, &length, &message)
            }
        }
        guard status == 0, let out else { throw MediaStoreError.encode(VariantMaker.cString(message)) }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }
}
