// SPDX-License-Identifier: Apache-2.0
public import Foundation

extension HeraldClient {
    /// Where a client keeps its state (tokens by kind, the user, pending work): a JSON file,
    /// written atomically.
    public struct Persistence: Sendable, Hashable {
        /// The file; nil keeps the state in memory only.
        public var url: URL?

        /// The file at `url` (a shared app-group container, a test's temporary folder).
        public static func file(_ url: URL) -> Self { Self(url: url) }

        /// Nothing on disk: the state lasts as long as the client (a command-line tool, a test).
        public static let memoryOnly = Self(url: nil)

        /// The default: `HeraldKit/state.json` in the app's Application Support directory. On
        /// Linux that is Foundation's `applicationSupportDirectory`: `$XDG_DATA_HOME/HeraldKit/state.json`,
        /// `~/.local/share/HeraldKit/state.json` when XDG_DATA_HOME is unset.
        public static var applicationSupport: Self {
            let base =
                FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
                ?? FileManager.default.temporaryDirectory
            return Self(url: base.appendingPathComponent("HeraldKit", isDirectory: true).appendingPathComponent("state.json"))
        }
    }
}
