import Foundation
import Hummingbird
import MediaStore
import NIOConcurrencyHelpers
import RichPushCore

/// `201`/`200` of `POST /api/media`.
struct MediaResponse: Codable, Sendable {
    /// The media id: the SHA-256 of the bytes stored (after stripping), in hex.
    var sha256: String
    var contentType: String
    var width: Int
    var height: Int
    var size: Int64
    /// Where the image is served.
    var url: String
    /// What was removed from the upload before it was stored (docs/configuration.md#the-media-store): `exif-gps`, `exif`,
    /// `xmp`, `iptc`, `comment`, `png-text`, `png-time`, `thumbnail`, `app-other`, `trailing-data`.
    var stripped: [String]
}

extension MediaResponse: SchemaRefining {
    static func refine(_ schema: inout JSONSchema) {
        schema.properties?["stripped"]?.items = [JSONSchema.string.with { $0.enumeration = StrippedMetadata.allCases.map(\.rawValue) }]
    }
}
