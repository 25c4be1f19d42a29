// SPDX-License-Identifier: Apache-2.0

/// The control API as Swift, for in-process tests.
extension FCMEmulator {
    /// A new service account for `projectID` with a fresh RSA-2048 key, trusted at once. Its
    /// `token_uri` is this emulator's ``tokenURL`` (Google's when called before ``start()``).
    public func makeServiceAccount(projectID: String) throws -> FCMServiceAccount {
        let account = try FCMServiceAccount.generate(projectID: projectID, tokenURI: self.tokenURLIfBound ?? FCMServiceAccount.googleTokenURI)
        self.trust(account)
        return account
    }

    /// Trusts an account made elsewhere: its `client_email` may now get access tokens with JWTs
    /// signed by its key (replacing an account with the same email).
    public func trust(_ account: FCMServiceAccount) {
        self.state.trust(account)
    }

    /// A virtual Android device of `projectID`: returns its registration token (`message.token`).
    public func createDevice(projectID: String, packageName: String = "com.example.app") -> String {
        self.state.createDevice(projectID: projectID, packageName: packageName, kind: .token)
    }

    /// A virtual Android device addressed by Firebase Installation ID (`message.fid`).
    public func createInstallation(projectID: String, packageName: String = "com.example.app") -> String {
        self.state.createDevice(projectID: projectID, packageName: packageName, kind: .fid)
    }

    /// Uninstalls the app: sends to the token answer 404 `UNREGISTERED` from now on.
    public func uninstall(_ token: String) {
        self.state.uninstall(token)
    }

    /// What the device has received, oldest first.
    public func inbox(_ token: String) -> [FCMMessageRecord] {
        self.state.inbox(token)
    }

    /// Waits (woken by deliveries, no polling) until the inbox holds `count` messages, then
    /// returns it. Returns what there is if the task is cancelled.
    public func messages(_ token: String, count: Int) async -> [FCMMessageRecord] {
        await self.state.messages(token, count: count)
    }

    /// Queues faults for the next send requests, one each, in order.
    public func inject(_ faults: [FCMFault]) {
        self.state.inject(faults)
    }

    /// Drops every queued fault.
    public func clearFaults() {
        self.state.clearFaults()
    }

    public var counters: FCMCounters { self.state.counters }

    public func resetCounters() {
        self.state.resetCounters()
    }

    /// Every access token handed out so far stops working now (sends answer 401).
    public func expireAccessTokens() {
        self.state.expireAccessTokens()
    }

    /// How long access tokens issued from now on live (default 3600 s; `expires_in` is one less).
    public func setAccessTokenLifetime(seconds: Int64) {
        self.state.setAccessTokenLifetime(seconds: seconds)
    }
}
