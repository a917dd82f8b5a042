import CImageCodecs

/// What a successful inspection found about an image.
public struct ImageInfo: Sendable, Equatable, Codable {
    /// `image/png`, `image/jpeg` or `image/gif`.
    public var contentType: String
    public var width: Int
    public var height: Int
    /// Bits per sample.
    public var bitDepth: Int
    /// `gray`, `gray+alpha`, `rgb`, `rgba`, `palette`, `ycbcr`, `cmyk`, `ycck`.
    public var colorModel: String
    /// Adam7-interlaced PNG or progressive JPEG.
    public var interlaced: Bool

    /// Creates an info value (used by the index when reading rows back).
    public init(contentType: String, width: Int, height: Int, bitDepth: Int, colorModel: String, interlaced: Bool) {
        self.contentType = contentType
        self.width = width
        self.height = height
        self.bitDepth = bitDepth
        self.colorModel = colorModel
        self.interlaced = interlaced
    }
}

/// Validates an image by sniffing it and fully decoding it with libpng, libjpeg or giflib.
public enum ImageInspector {
    /// Sniffs, checks limits and fully decodes `bytes`; throws the rejection on any problem.
    ///
    /// Blocking and CPU-bound: call it from a thread pool, not an event loop.
    public static func inspect(_ bytes: UnsafeRawBufferPointer, limits: MediaLimits) throws(MediaRejection) -> ImageInfo {
        if let rejection = limits.checkSize(bytes.count) { throw rejection }
        if let rejection = ImageSniffer.rejection(for: ImageSniffer.sniff(bytes.bindMemory(to: UInt8.self))) {
            throw rejection
        }
        var result = rp_image_result()
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        rp_image_inspect(base, bytes.count, rp_image_limits(max_pixels: limits.maxPixels, max_side: limits.maxSide), &result)
        let message = withUnsafeBytes(of: &result.message) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let (format, contentType) = switch UInt32(result.format) {
        case RP_FORMAT_PNG.rawValue: ("PNG", "image/png")
        case RP_FORMAT_GIF.rawValue: ("GIF", "image/gif")
        default: ("JPEG", "image/jpeg")
        }
        switch UInt32(result.status) {
        case RP_IMAGE_OK.rawValue:
            return ImageInfo(
                contentType: contentType,
                width: Int(result.width), height: Int(result.height),
                bitDepth: Int(result.bit_depth), colorModel: colorModelName(result.color_model),
                interlaced: result.interlaced != 0)
        case RP_IMAGE_TOO_LARGE.rawValue:
            throw MediaRejection(.tooLarge, message)
        case RP_IMAGE_UNSUPPORTED.rawValue:
            throw MediaRejection(.unsupported, message)
        default:
            throw MediaRejection(.corrupt, "\(format): \(message)")
        }
    }

    /// Convenience over an array or `Data`.
    public static func inspect(_ bytes: some ContiguousBytes, limits: MediaLimits) throws(MediaRejection) -> ImageInfo {
        do {
            return try bytes.withUnsafeBytes { raw in try inspect(raw, limits: limits) }
        } catch let rejection as MediaRejection {
            throw rejection
        } catch {
            throw MediaRejection(.corrupt, "\(error)")
        }
    }

    private static func colorModelName(_ model: Int32) -> String {
        switch UInt32(model) {
        case RP_COLOR_GRAY.rawValue: "gray"
        case RP_COLOR_GRAY_ALPHA.rawValue: "gray+alpha"
        case RP_COLOR_RGB.rawValue: "rgb"
        case RP_COLOR_RGBA.rawValue: "rgba"
        case RP_COLOR_PALETTE.rawValue: "palette"
        case RP_COLOR_YCBCR.rawValue: "ycbcr"
        case RP_COLOR_CMYK.rawValue: "cmyk"
        case RP_COLOR_YCCK.rawValue: "ycck"
        default: "unknown"
        }
    }
}

import Foundation
