// swift-tools-version: 5.4
// SPDX-License-Identifier: Apache-2.0
import PackageDescription

// The HTTP/2 fuzzer, outside the main package's dependency graph. Build and run it with
// `scripts/fuzz` (libFuzzer, `-sanitize=fuzzer`, which the swift.org toolchain ships on Linux).
//
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM renames an executable's entry point to
// `<module>_main` and links `main` to it, but a libFuzzer target has no entry point of its own
// (`-parse-as-library`): libFuzzer's `main` calls `LLVMFuzzerTestOneInput`.
let package = Package(
    name: "herald-fuzz",
    dependencies: [
        .package(name: "herald", path: "../")
    ],
    targets: [
        .executableTarget(
            name: "APNSHTTP2Fuzzer",
            dependencies: [
                .product(name: "APNSClient", package: "herald"),
                .product(name: "APNSEmulator", package: "herald"),
            ]
        )
    ]
)
