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
        .executable(name: "richpush-bench", targets: ["richpush-bench"]),
        .library(name: "BenchKit", targets: ["BenchKit"]),
        .library(name: "HTTP2Client", targets: ["HTTP2Client"]),
        .library(name: "MediaStore", targets: ["MediaStore"]),
        .library(name: "RichPushCore", targets: ["RichPushCore"]),
        .library(name: "HTTPEdge", targets: ["HTTPEdge"]),
        .library(name: "RichPushAPI", targets: ["RichPushAPI"]),
        .library(name: "RichPushServer", targets: ["RichPushServer"]),
        .library(name: "RichPushClient", targets: ["RichPushClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Traces over OTLP/HTTP only: the gRPC exporter's packages are left out.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // System libraries: headers and link flags come from pkg-config, apt names the package.
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        .systemLibrary(name: "CJPEG", pkgConfig: "libjpeg", providers: [.apt(["libjpeg-dev"])]),
        // giflib installs no pkg-config file on every distribution: its header is in the default path.
        .systemLibrary(name: "CGIF", providers: [.apt(["libgif-dev"])]),
        // The only code that calls setjmp: one C function inspects and fully decodes a buffer.
        // giflib: linked here (a module map's `link` reaches only Swift importers, and it has no pkg-config on every distribution).
        .target(name: "CImageCodecs", dependencies: ["CPNG", "CJPEG", "CGIF"], linkerSettings: [.linkedLibrary("gif")]),
        // Linux epoll for the load tool's threads (Glibc's module does not carry it).
        .target(name: "CEpoll"),
        .target(name: "CTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // Sealed memory files, which the fast path's answers over plain HTTP sendfile(2) from.
        .target(name: "CMemoryFile"),
        // Deadlines' partner: a circuit breaker per dependency, and the error a 503 is made from.
        .target(
            name: "Resilience",
            dependencies: [
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The one place that knows SQLite and PostgreSQL: stores write SQL once against it.
        .target(
            name: "Telemetry",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SQLEngine",
            dependencies: [
                "Resilience",
                "Telemetry",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "MediaStore",
            dependencies: [
                "Telemetry",
                "CImageCodecs",
                "Resilience",
                "SQLEngine",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "RichPushCore",
            dependencies: [
                "Telemetry",
                "MediaStore",
                "SQLEngine",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                // Campaigns' words are Mustache templates (docs/api.md#templates-and-localization-keys).
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushDelivery",
            dependencies: [
                "HTTP2Client",
                "Telemetry",
                "MediaStore",
                "Resilience",
                "RichPushCore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "PushSandboxes",
            dependencies: [
                "PushDelivery", "RichPushCore", "APNsSandbox",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNsSandbox",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP edge: the listener, the front that reads request heads, wire files, TLS and
        // HTTP/2 handling, deadlines, client addresses, the access log. It knows no store and no
        // route: it asks the application's hot routes (`HotRoutes`) or hands the request on.
        .target(
            name: "HTTPEdge",
            dependencies: [
                "CEpoll",
                "CMemoryFile",
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP2", package: "swift-nio-extras"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The JSON API, the console and the hot routes (Hummingbird): a folder per feature, each
        // with its controller, its endpoints and its models (docs/design/layout.md).
        .target(
            name: "RichPushAPI",
            dependencies: [
                "Telemetry",
                "HTTPEdge",
                "MediaStore",
                "Resilience",
                "RichPushCore",
                "PushDelivery",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            // The console's and the Web Push demo's HTML, CSS and JavaScript, and the Mustache
            // templates the console fills in: compiled into the binary (PageFile), so that a
            // deployed `richpush` is one file.
            resources: [.embedInCode("Pages/console-app.mustache"), .embedInCode("Pages/console-forbidden.mustache"), .embedInCode("Pages/console-signin.mustache"), .embedInCode("Pages/console.css"), .embedInCode("Pages/console.js"), .embedInCode("Pages/console-live-activities.js"), .embedInCode("Pages/console-ab-tests.js"), .embedInCode("Pages/console-audit.js"), .embedInCode("Pages/webpush-demo.html"), .embedInCode("Pages/webpush-sw.js")],
            swiftSettings: swiftSettings
        ),
        // Composition: the configuration, building the application from the stores, the API
        // and the edge, and wiring the push providers.
        .target(
            name: "RichPushServer",
            dependencies: [
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                "Telemetry",
                "RichPushAPI",
                "HTTPEdge",
                "MediaStore",
                "Resilience",
                "RichPushCore",
                "PushDelivery",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            // The default image, for a `serve` whose media directory has none (SampleImages).
            resources: [.embedInCode("Samples/logo.png")],
            swiftSettings: swiftSettings
        ),
        // The device side (an app and its Notification Service Extension): Foundation only.
        .target(name: "RichPushClient", swiftSettings: swiftSettings),
        .executableTarget(
            name: "richpush",
            dependencies: [
                "HTTPEdge",
                "MediaStore",
                "RichPushCore",
                "RichPushServer",
                "PushDelivery",
                "APNsSandbox",
                "PushSandboxes",
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // HTTP/2's client side without I/O (frames, flow control, HPACK for requests): the load
        // tool's connections and the push connections to APNs both speak through it.
        .target(
            name: "HTTP2Client",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HTTP2ClientTests",
            dependencies: [
                "HTTP2Client",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "BenchKit",
            dependencies: [
                "CEpoll",
                "CTLS",
                "HTTP2Client",
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "richpush-bench",
            dependencies: ["BenchKit", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "BenchKitTests",
            dependencies: [
                "BenchKit",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "RichPushTestSupport", dependencies: ["MediaStore"], path: "Tests/TestSupport", swiftSettings: swiftSettings),
        .testTarget(name: "ResilienceTests", dependencies: ["Resilience"], swiftSettings: swiftSettings),
        .testTarget(
            name: "MediaStoreTests",
            dependencies: [
                "MediaStore", "RichPushTestSupport", "SQLEngine", "Resilience",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RichPushCoreTests",
            dependencies: ["RichPushCore", "MediaStore", "RichPushTestSupport", "SQLEngine", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RichPushClientTests",
            dependencies: ["RichPushClient"],
            swiftSettings: swiftSettings
        ),
        // The push stand-ins running for a test, and the accounts they check (APNSwift ships
        // its test server as a library the same way): for the delivery, sandbox and server tests.
        .target(
            name: "PushTestSupport",
            dependencies: [
                "APNsSandbox", "PushDelivery", "PushSandboxes", "RichPushCore", "RichPushTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tests/PushTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "SQLEngineTests",
            dependencies: ["SQLEngine", "RichPushCore", "MediaStore", "RichPushTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PushDeliveryTests",
            dependencies: [
                "PushDelivery", "HTTP2Client", "RichPushCore", "MediaStore", "SQLEngine", "APNsSandbox", "PushSandboxes", "PushTestSupport", "RichPushTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "APNsSandboxTests", dependencies: ["APNsSandbox"], swiftSettings: swiftSettings),
        .testTarget(
            name: "PushSandboxesTests",
            dependencies: [
                "PushSandboxes", "PushDelivery", "RichPushCore", "PushTestSupport", "RichPushTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The HTTP edge alone: what the front reads, wire files, client addresses, and a listener
        // serving hot routes of its own with no store and no router of RichPush.
        .testTarget(
            name: "HTTPEdgeTests",
            dependencies: [
                "HTTPEdge",
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RichPushAPITests",
            dependencies: [
                "RichPushAPI", "RichPushCore", "MediaStore", "SQLEngine", "RichPushTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RichPushServerTests",
            dependencies: [
                "RichPushServer", "RichPushAPI", "HTTPEdge", "RichPushCore", "RichPushClient", "MediaStore", "RichPushTestSupport", "PushDelivery", "APNsSandbox", "SQLEngine",
                "PushSandboxes", "Resilience", "PushTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "richpush", "MediaStore", "RichPushCore", "RichPushTestSupport", "APNsSandbox", "SQLEngine",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
