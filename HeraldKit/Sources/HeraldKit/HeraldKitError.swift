// SPDX-License-Identifier: Apache-2.0

/// Why a call to Herald failed, with Herald's stable error code (`bad_device_token`,
/// `forbidden`, …) or one of HeraldKit's own: `network` (no answer), `server_unavailable`
/// (429/5xx after every retry), `bad_response` (an answer that is not Herald's JSON),
/// `user_assertion_unavailable` (the app's `userAssertions` source failed). Cancellation is not
/// one of these: a cancelled call throws `CancellationError`.
public struct HeraldKitError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var status: Int?
    public var message: String

    public init(code: String, status: Int?, message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    public var description: String { "\(self.code)\(self.status.map { " (\($0))" } ?? ""): \(self.message)" }

    /// Worth trying again: no answer, too many requests, or a server error.
    public var isRetryable: Bool { self.code == "network" || self.status.map { $0 == 429 || $0 >= 500 } ?? false }
}
