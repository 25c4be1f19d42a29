// swift-tools-version: 6.1
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "herald",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "herald", targets: ["HeraldCLI"]),
        .executable(name: "herald-bench", targets: ["HeraldBench"]),
        .library(name: "APNSModels", targets: ["APNSModels"]),
        .library(name: "APNSEmulator", targets: ["APNSEmulator"]),
        .library(name: "APNSClient", targets: ["APNSClient"]),
    ],
    dependencies: [
        // The app-side SDK (HeraldKit, HeraldKitTesting) and the API types it shares with the
        // server (HeraldAPI): a package of its own, so an app that adds it builds no server code.
        .package(path: "HeraldKit"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache.git", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.24.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
    ],
    targets: [
        .testTarget(
            name: "HeraldKitTests",
            dependencies: [
                .product(name: "HeraldKit", package: "HeraldKit"), .product(name: "HeraldAPI", package: "HeraldKit"),
                .product(name: "HeraldKitTesting", package: "HeraldKit"),
                "HeraldServer", "HeraldCore", "HeraldTesting", "APNSModels", "APNSEmulator",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            // Provisioning profiles made by Fixtures/make-fixtures.sh, read by path (#filePath).
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNSModels",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNSEmulator",
            dependencies: [
                "APNSModels",
                "APNSTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // An FCM HTTP v1 of our own: the OAuth token endpoint, the send endpoint, virtual
            // Android devices and faults, over Hummingbird.
            name: "FCMEmulator",
            dependencies: [
                "APNSModels",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // FCM HTTP v1 for Herald: a service account's access tokens, messages over HTTP/2.
            name: "FCMClient",
            dependencies: [
                "APNSModels",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "FCMEmulatorTests",
            dependencies: [
                "FCMEmulator", "APNSModels", "HeraldTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            // Web Push for Herald and its emulator: RFC 8291 aes128gcm, RFC 8292 VAPID.
            name: "WebPush",
            dependencies: ["APNSModels", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WebPushTests",
            dependencies: ["WebPush", "APNSModels", "HeraldTesting", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            // A Web Push service of our own (RFC 8030 with Apple's, Mozilla's and FCM's answers),
            // virtual browsers, and the WebSocket protocol Firefox's push client speaks.
            name: "WebPushEmulator",
            dependencies: [
                "WebPush", "APNSModels",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "WebPushEmulatorTests",
            dependencies: [
                "WebPushEmulator", "WebPush", "APNSModels", "HeraldTesting",
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNSTransport",
            dependencies: [
                "APNSModels",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "HeraldCore",
            dependencies: [
                "APNSModels",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldSQLite",
            dependencies: [
                "CSQLite", "HeraldCore", "APNSModels",
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldPostgres",
            dependencies: [
                "HeraldCore", "APNSModels",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "APNSClient",
            dependencies: [
                "APNSModels",
                "APNSTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldServer",
            dependencies: [
                "APNSClient", "APNSEmulator", "FCMClient", "FCMEmulator", "WebPush", "WebPushEmulator", "APNSModels", "HeraldCore",
                "HeraldSQLite", "HeraldPostgres",
                .product(name: "HeraldAPI", package: "HeraldKit"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            // Compiled in by scripts/embed-resources (EmbeddedResources.swift), so `herald` needs no
            // resource bundle beside it.
            exclude: ["openapi.yaml", "Dashboard/Templates", "Dashboard/Static", "Web"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "HeraldBench",
            dependencies: [
                "APNSClient", "APNSModels", "FCMClient", "WebPush",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "HeraldCLI",
            dependencies: [
                .product(name: "HeraldKit", package: "HeraldKit"),
                "APNSModels",
                "APNSEmulator",
                "APNSClient",
                "FCMEmulator",
                "WebPushEmulator",
                "HeraldServer",
                "HeraldCore",
                "HeraldSQLite",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldTesting",
            dependencies: ["APNSModels", "APNSEmulator"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNSClientTests",
            dependencies: [
                "APNSClient", "APNSEmulator", "APNSModels", "HeraldTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldServerTests",
            dependencies: [
                "HeraldServer", "HeraldCore", "HeraldSQLite", "APNSModels", "APNSEmulator", "FCMEmulator", "WebPush", "WebPushEmulator",
                "HeraldTesting",
                .product(name: "HeraldAPI", package: "HeraldKit"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            // The store contract, written once, run against every driver.
            name: "HeraldStoreTests",
            dependencies: [
                "HeraldSQLite", "HeraldPostgres", "HeraldCore", "APNSModels", "HeraldTesting", "CSQLite",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNSModelsTests",
            dependencies: ["APNSModels"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNSTransportTests",
            dependencies: [
                "APNSTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "HeraldCLITests",
            // Depending on the executable makes `swift test` build `herald`, which the tests run.
            dependencies: ["HeraldCLI", "HeraldTesting", "APNSEmulator", "APNSModels"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "APNSEmulatorTests",
            dependencies: [
                "APNSEmulator", "APNSModels", "HeraldTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
