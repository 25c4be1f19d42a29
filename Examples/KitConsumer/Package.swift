// swift-tools-version: 6.1
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

// An app's view of HeraldKit: a package that adds HeraldKit by path and nothing else. CI builds
// it (`.ci/run`) with a scratch folder of its own, so what it compiles is HeraldKit's graph alone:
// Foundation and swift-crypto, no NIO, Hummingbird or PostgreSQL.
let package = Package(
    name: "KitConsumer",
    platforms: [.iOS(.v15), .macOS(.v12), .watchOS(.v8), .tvOS(.v15), .visionOS(.v1)],
    dependencies: [.package(path: "../../HeraldKit")],
    targets: [
        .executableTarget(
            name: "KitConsumer",
            dependencies: [
                .product(name: "HeraldKit", package: "HeraldKit")
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
