import CImageCodecs

/// Encodes pixels as JPEG with libjpeg (baseline or progressive).
public enum JPEGEncoder {
    /// Encodes `width` × `height` pixels of `components` 8-bit channels each (1 gray, 3 RGB;
    /// other counts are written as libjpeg's "unknown" color space), row by row.
    /// `icc` (an ICC profile) is written in APP2 segments.
    public static func encode(pixels: [UInt8], width: Int, height: Int, components: Int, quality: Int = 85,
                              progressive: Bool = false, icc: [UInt8]? = nil) throws -> [UInt8] {
        precondition(pixels.count == width * height * components, "pixels must hold width × height × components bytes")
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = pixels.withUnsafeBufferPointer { buffer in
            (icc ?? []).withUnsafeBufferPointer { profile in
                rp_jpeg_encode(buffer.baseAddress, UInt32(width), UInt32(height), Int32(components), Int32(quality),
                               progressive ? 1 : 0, icc == nil ? nil : profile.baseAddress, icc?.count ?? 0, &out, &length, &message)
            }
        }
        guard status == 0, let out else {
            throw MediaStoreError.encode(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        defer { free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }
}

#if canImport(Glibc)
import Glibc
#endif
