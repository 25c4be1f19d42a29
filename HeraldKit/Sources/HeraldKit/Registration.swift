// SPDX-License-Identifier: Apache-2.0

/// A token a ``HeraldClient`` knows, as its state file has it: registered, or with work Herald
/// has not confirmed yet.
public struct Registration: Sendable, Hashable {
    /// Where the token stands with Herald.
    public struct Status: Sendable, Hashable, CustomStringConvertible {
        private enum Value: String { case registered, pendingRegistration, pendingRemoval }
        private let value: Value

        /// Herald has what the client last sent.
        public static let registered = Self(value: .registered)
        /// A registration (or a user change) failed for want of a network or server; tried again later.
        public static let pendingRegistration = Self(value: .pendingRegistration)
        /// An unregistration failed for want of a network or server; tried again later.
        public static let pendingRemoval = Self(value: .pendingRemoval)

        public var description: String { self.value.rawValue }
    }

    public var token: PushToken
    public var details: DeviceDetails
    public var status: Status
    /// Failed attempts in a row at the pending work.
    public var failures: Int
    /// The last failure's code (`network`, `server_unavailable`, …).
    public var lastError: String?

    public init(token: PushToken, details: DeviceDetails, status: Status, failures: Int = 0, lastError: String? = nil) {
        self.token = token
        self.details = details
        self.status = status
        self.failures = failures
        self.lastError = lastError
    }
}
