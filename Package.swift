// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "RichPush",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "richpush", targets: ["richpush"]),
        .library(name: "MediaStore", targets: ["MediaStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
    ],
    targets: [
        // System libraries: headers and link flags come from pkg-config, apt names the package.
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CJPEG", pkgConfig: "libjpeg", providers: [.apt(["libjpeg-dev"])]),
        // The only code that calls setjmp: one C function inspects and fully decodes a buffer.
        .target(name: "CImageCodecs", dependencies: ["CPNG", "CJPEG"]),
        .target(
            name: "MediaStore",
            dependencies: [
                "CImageCodecs",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "richpush",
            dependencies: [
                "MediaStore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "RichPushTestSupport", path: "Tests/TestSupport", swiftSettings: swiftSettings),
        .testTarget(
            name: "MediaStoreTests",
            dependencies: ["MediaStore", "RichPushTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["richpush", "MediaStore", "RichPushTestSupport"],
            swiftSettings: swiftSettings
        ),
    ]
)
