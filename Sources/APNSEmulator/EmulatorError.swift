// SPDX-License-Identifier: Apache-2.0

/// An error of the emulator's own making (configuration, files, control API input).
public struct EmulatorError: Error, Sendable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case io, tls, bind, invalidRequest = "invalid_request", notFound = "not_found"
            case conflict, methodNotAllowed = "method_not_allowed", payloadTooLarge = "payload_too_large"
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public static let io = Code(.io)
        public static let tls = Code(.tls)
        public static let bind = Code(.bind)
        public static let invalidRequest = Code(.invalidRequest)
        public static let notFound = Code(.notFound)
        public static let conflict = Code(.conflict)
        public static let methodNotAllowed = Code(.methodNotAllowed)
        public static let payloadTooLarge = Code(.payloadTooLarge)
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
