// SPDX-License-Identifier: Apache-2.0

/// What an app calls on ``HeraldClient``: depend on this protocol, and an app's own tests can
/// hand in a test double (`HeraldKitTesting`'s `MockHeraldClient`, or their own) that touches
/// no network.
public protocol HeraldClientProtocol: Sendable {
    /// Registers (or refreshes) `token`; see ``HeraldClient/register(_:_:userAssertion:)``.
    @discardableResult
    func register(_ token: PushToken, _ details: DeviceDetails, userAssertion: String?) async throws -> RegisteredDevice
    /// Removes `token` from Herald; see ``HeraldClient/unregister(_:)``.
    func unregister(_ token: PushToken) async throws
    /// Moves every token to `userID` (nil: signed out); see ``HeraldClient/setUser(_:assertion:)``.
    func setUser(_ userID: String?, assertion: String?) async throws
    /// Tries pending work now; the number still pending. See ``HeraldClient/retryPending()``.
    @discardableResult
    func retryPending() async throws -> Int
}

extension HeraldClientProtocol {
    /// Registers `token` without a user assertion of the caller's own.
    @discardableResult
    public func register(_ token: PushToken, _ details: DeviceDetails) async throws -> RegisteredDevice {
        try await self.register(token, details, userAssertion: nil)
    }

    /// Sets the user without an assertion of the caller's own (a logout, or a client that asks
    /// its `userAssertions` source).
    public func setUser(_ userID: String?) async throws {
        try await self.setUser(userID, assertion: nil)
    }
}
