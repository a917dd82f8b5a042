import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(UserNotifications)
import UserNotifications
#endif

/// The payload types (PNG, JPEG, and GIF since docs/api.md#options-badges-and-paced-sends), by declared media type and by signature.
enum ImageType: Sendable, Equatable {
    case png, jpeg, gif

    static let pngSignature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let jpegSignature: [UInt8] = [0xFF, 0xD8, 0xFF]
    static let gifSignatures: [[UInt8]] = [Array("GIF87a".utf8), Array("GIF89a".utf8)]

    /// What the first bytes of a body say, so far.
    enum Sniffed: Sendable, Equatable {
        case undecided
        case notAnImage
        case image(ImageType)
    }

    var mediaType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .gif: "image/gif"
        }
    }
    var fileExtension: String {
        switch self {
        case .png: "png"
        case .jpeg: "jpg"
        case .gif: "gif"
        }
    }

    /// The type a `Content-Type` value names (parameters and case ignored); nil for anything else.
    init?(contentType: String?) {
        let essence = contentType?.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        switch essence ?? "" {
        case "image/png": self = .png
        case "image/jpeg": self = .jpeg
        case "image/gif": self = .gif
        default: return nil
        }
    }

    /// Reads the signature at the start of `head`; with `complete` the body has ended, so a
    /// prefix too short to decide is not an image.
    static func sniff(_ head: Data, complete: Bool) -> Sniffed {
        let bytes = [UInt8](head.prefix(pngSignature.count))
        if bytes.starts(with: jpegSignature) { return .image(.jpeg) }
        if bytes.starts(with: pngSignature) { return .image(.png) }
        if gifSignatures.contains(where: { bytes.starts(with: $0) }) { return .image(.gif) }
        let couldStillBe = pngSignature.starts(with: bytes) || jpegSignature.starts(with: bytes) || gifSignatures.contains { $0.starts(with: bytes) }
        return couldStillBe && !complete ? .undecided : .notAnImage
    }

    static func hex(_ head: Data) -> String {
        head.prefix(8).map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: " ")
    }
}
