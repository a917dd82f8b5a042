/// Size limits applied to every image before it is stored (docs/configuration.md#the-media-store), and whether its metadata
/// is kept (docs/configuration.md#the-media-store).
public struct MediaLimits: Sendable, Equatable {
    /// Largest accepted file, in bytes (Apple's notification-attachment limit by default).
    public var maxBytes: Int
    /// Largest accepted width × height.
    public var maxPixels: UInt64
    /// Largest accepted width or height.
    public var maxSide: UInt32
    /// Store images byte for byte, EXIF, XMP, IPTC and comments included (`--keep-metadata`);
    /// by default they are stripped losslessly (`MetadataStripper`).
    public var keepMetadata = false

    /// The defaults of docs/configuration.md#the-media-store: 10 MiB, 40 megapixels, 16384 per side.
    public static let `default` = MediaLimits(maxBytes: 10_485_760, maxPixels: 40_000_000, maxSide: 16_384)

    /// Creates limits; every value must be positive.
    public init(maxBytes: Int, maxPixels: UInt64, maxSide: UInt32, keepMetadata: Bool = false) {
        self.maxBytes = maxBytes
        self.maxPixels = maxPixels
        self.maxSide = maxSide
        self.keepMetadata = keepMetadata
    }

    /// The rejection for a body of `size` bytes, or nil when it is within the limit.
    public func checkSize(_ size: Int) -> MediaRejection? {
        guard size > maxBytes else { return nil }
        return MediaRejection(.tooLarge, "\(size) bytes, over the limit of \(maxBytes) bytes")
    }
}
