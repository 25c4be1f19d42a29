// swift-tools-version: 6.1
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

// HeraldKit, the app-side SDK, in a package of its own: an app that adds it builds Foundation,
// swift-crypto and these targets, and no server code (no NIO, Hummingbird or PostgreSQL).
// `scripts/check-kit-dependencies` fails CI if this graph gains anything but swift-crypto.
// The floor is what a shipping app supports: nothing here may use an API newer than these.

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "HeraldKit",
    platforms: [.iOS(.v15), .macOS(.v12), .watchOS(.v8), .tvOS(.v15), .visionOS(.v1)],
    products: [
        .library(name: "HeraldKit", targets: ["HeraldKit"]),
        // The API's request and response types, shared with the Herald server.
        .library(name: "HeraldAPI", targets: ["HeraldAPI"]),
        // Test doubles for an app's own tests (`MockHeraldClient`).
        .library(name: "HeraldKitTesting", targets: ["HeraldKitTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0")
    ],
    targets: [
        .target(
            // The API's request and response types and the end-to-end envelope: the contract the
            // server, HeraldKit and the tests share. Foundation and swift-crypto only.
            name: "HeraldAPI",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldKit",
            dependencies: ["HeraldAPI", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "HeraldKitTesting",
            dependencies: ["HeraldKit"],
            swiftSettings: swiftSettings
        ),
    ]
)
