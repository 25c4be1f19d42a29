// SPDX-License-Identifier: Apache-2.0
import Foundation
public import HeraldKit

/// A ``HeraldClientProtocol`` for an app's own tests: touches no network, records every call,
/// answers registrations with a ``RegisteredDevice`` built from the call, and throws what the
/// test tells it to.
///
/// ```swift
/// let herald = MockHeraldClient()
/// herald.failure = HeraldKitError(code: "network", status: nil, message: "offline")
/// let model = PushModel(herald: herald)   // the app's code, taking `any HeraldClientProtocol`
/// await model.didReceiveToken(Data([1, 2, 3]))
/// #expect(herald.calls == [.register(.device(Data([1, 2, 3])), userID: nil)])
/// ```
public final class MockHeraldClient: HeraldClientProtocol, Sendable {
    /// One call the app made.
    public enum Call: Sendable, Hashable {
        case register(PushToken, userID: String?)
        case unregister(PushToken)
        case setUser(String?)
        case retryPending
    }

    private struct State {
        var calls: [Call] = []
        var failure: (any Error)?
        var registered: [PushToken: DeviceDetails] = [:]
        var userID: String?
        var pending = 0
    }

    private let state = Locked(State())

    public init() {}

    /// Every call so far, in order.
    public var calls: [Call] { self.state.withLock { $0.calls } }
    /// What every call throws while set (a ``HeraldKitError``, `CancellationError`, …).
    public var failure: (any Error)? {
        get { self.state.withLock { $0.failure } }
        set { self.state.withLock { $0.failure = newValue } }
    }
    /// The tokens registered and not unregistered, with their details.
    public var registered: [PushToken: DeviceDetails] { self.state.withLock { $0.registered } }
    /// The user the last `setUser` set.
    public var userID: String? { self.state.withLock { $0.userID } }
    /// What ``retryPending()`` answers.
    public var pendingCount: Int {
        get { self.state.withLock { $0.pending } }
        set { self.state.withLock { $0.pending = newValue } }
    }

    @discardableResult
    public func register(_ token: PushToken, _ details: DeviceDetails, userAssertion: String?) async throws -> RegisteredDevice {
        let userID = try self.record(.register(token, userID: details.userID)) { state in
            var details = details
            if details.userID == nil { details.userID = state.userID }
            state.registered[token] = details
            return details.userID
        }
        return RegisteredDevice(
            token: token.hex, kind: token.kind, userID: userID, active: true, lastRegisteredAt: Int64(Date().timeIntervalSince1970))
    }

    public func unregister(_ token: PushToken) async throws {
        try self.record(.unregister(token)) { _ = $0.registered.removeValue(forKey: token) }
    }

    public func setUser(_ userID: String?, assertion: String?) async throws {
        try self.record(.setUser(userID)) { state in
            state.userID = userID
            for token in state.registered.keys { state.registered[token]?.userID = userID }
        }
    }

    @discardableResult
    public func retryPending() async throws -> Int {
        try self.record(.retryPending) { $0.pending }
    }

    private func record<T>(_ call: Call, _ body: (inout State) -> T) throws -> T {
        try self.state.withLock { state in
            state.calls.append(call)
            if let failure = state.failure { throw failure }
            return body(&state)
        }
    }
}

/// `NSLock` around a value (HeraldKitTesting runs on every OS HeraldKit does).
private final class Locked<Value>: @unchecked Sendable {
    // Safe: `value` is only touched with `lock` held.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        self.lock.lock()
        defer { self.lock.unlock() }
        return try body(&self.value)
    }
}
