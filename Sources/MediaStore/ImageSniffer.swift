/// Decides what a file is from its first bytes; names and claimed types are never consulted.
public enum ImageSniffer {
    /// What the leading bytes say.
    public enum Verdict: Sendable, Equatable {
        case png
        case jpeg
        /// GIF87a or GIF89a, animated or not (docs/api.md#options-badges-and-paced-sends).
        case gif
        /// Recognised as something RichPush does not accept; `mediaType` names it.
        case other(mediaType: String)
        /// A PNG whose 8-byte signature was altered (typically by a text-mode transfer).
        case damagedPNGSignature
        /// Nothing recognisable.
        case unknown
        /// Zero bytes.
        case empty
    }

    /// How many leading bytes `sniff` looks at, at most.
    public static let prefixLength = 512

    /// Classifies `bytes` (the file's beginning is enough) by magic numbers.
    public static func sniff(_ bytes: some Collection<UInt8>) -> Verdict {
        let b = Array(bytes.prefix(prefixLength))
        if b.isEmpty { return .empty }
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + magic.count && Array(b[offset..<offset + magic.count]) == magic
        }
        func ascii(_ s: String, at offset: Int = 0) -> Bool { starts(Array(s.utf8), at: offset) }

        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if b.count >= 4, b[1] == 0x50, b[2] == 0x4E, b[3] == 0x47, b[0] & 0x7F == 0x09 || b[0] == 0x89 {
            return .damagedPNGSignature
        }
        if ascii("GIF87a") || ascii("GIF89a") { return .gif }
        if ascii("RIFF"), ascii("WEBP", at: 8) { return .other(mediaType: "image/webp") }
        if ascii("BM"), b.count >= 14 { return .other(mediaType: "image/bmp") }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) {
            return .other(mediaType: "image/tiff")
        }
        if starts([0x49, 0x49, 0x2B, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2B]) {
            return .other(mediaType: "image/tiff")
        }
        if ascii("ftyp", at: 4), b.count >= 12 {
            let brand = String(decoding: b[8..<12], as: UTF8.self)
            switch brand {
            case "avif", "avis": return .other(mediaType: "image/avif")
            case "heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1": return .other(mediaType: "image/heic")
            case "qt  ": return .other(mediaType: "video/quicktime")
            default: return .other(mediaType: "video/mp4")
            }
        }
        if starts([0x00, 0x00, 0x01, 0x00]) { return .other(mediaType: "image/x-icon") }
        if starts([0xFF, 0x0A]) || starts([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) {
            return .other(mediaType: "image/jxl")
        }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) {
            return .other(mediaType: "image/jp2")
        }
        if ascii("8BPS") { return .other(mediaType: "image/vnd.adobe.photoshop") }
        if ascii("%PDF-") { return .other(mediaType: "application/pdf") }
        if starts([0x50, 0x4B, 0x03, 0x04]) { return .other(mediaType: "application/zip") }
        if starts([0x1F, 0x8B]) { return .other(mediaType: "application/gzip") }
        if let markup = sniffMarkup(b) { return .other(mediaType: markup) }
        return .unknown
    }

    /// Text formats: SVG, other XML, HTML (after an optional BOM and white space).
    private static func sniffMarkup(_ b: [UInt8]) -> String? {
        var start = 0
        if b.starts(with: [0xEF, 0xBB, 0xBF]) { start = 3 }
        while start < b.count, [0x20, 0x09, 0x0A, 0x0D].contains(b[start]) { start += 1 }
        guard start < b.count, b[start] == UInt8(ascii: "<") else { return nil }
        let text = String(decoding: b[start...], as: UTF8.self).lowercased()
        if text.contains("<svg") { return "image/svg+xml" }
        for tag in ["<!doctype html", "<html", "<head", "<body", "<script", "<iframe", "<table", "<div", "<p>", "<a ", "<title"] where text.hasPrefix(tag) {
            return "text/html"
        }
        if text.hasPrefix("<?xml") || text.hasPrefix("<!doctype") { return "application/xml" }
        return nil
    }

    /// The rejection for a verdict that is not PNG, JPEG or GIF, or nil for those.
    public static func rejection(for verdict: Verdict) -> MediaRejection? {
        switch verdict {
        case .png, .jpeg, .gif: return nil
        case .other(let type): return MediaRejection(.unsupported, "\(type) is not accepted; send PNG, JPEG or GIF")
        case .damagedPNGSignature:
            return MediaRejection(.corrupt, "PNG signature is damaged (was the file sent in text mode?)")
        case .unknown: return MediaRejection(.unsupported, "not an image (unrecognised content); send PNG, JPEG or GIF")
        case .empty: return MediaRejection(.unsupported, "the file is empty; send PNG, JPEG or GIF")
        }
    }
}
