/// The sample images the server needs, compiled into the binary by SwiftPM (`.embedInCode` in
/// Package.swift, as the console's pages are): `serve` started from any folder still has its
/// default image (issue #49). Each is a copy of the file of the same name in the repository's
/// `media/`, byte for byte, so it has the same SHA-256 whichever is ingested.
enum SampleImages {
    /// Every embedded sample, by its file name (the name it is ingested under).
    private static let embedded: [String: [UInt8]] = [
        "logo.png": PackageResources.logo_png,
    ]

    /// The bytes of the sample named `name`, or nil when the binary carries none of that name.
    static func bytes(named name: String) -> [UInt8]? {
        embedded[name]
    }
}
