// SPDX-License-Identifier: Apache-2.0

/// An error starting the emulator: its files, TLS set-up, or a port it cannot bind.
/// (Control-API input errors are answered over HTTP, not thrown.)
public struct EmulatorError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case io, tls, bind
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public static let io = Code(.io)
        public static let tls = Code(.tls)
        public static let bind = Code(.bind)
        public var description: String { self.base.rawValue }
    }

    public var code: Code
    public var message: String
    public var cause: (any Error)?

    public init(_ code: Code, _ message: String, cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        "\(self.code): \(self.message)" + (self.cause.map { " (\($0))" } ?? "")
    }
}
