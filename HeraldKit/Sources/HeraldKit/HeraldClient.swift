// SPDX-License-Identifier: Apache-2.0
public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Registers the app's push tokens with a Herald server, with a `register`-scoped key — the
/// only kind of key that may ship inside an app: it can register and unregister this app's
/// devices and nothing else.
///
/// Call ``register(_:_:userAssertion:)`` at every launch with the token the system just handed
/// over, never one saved from an earlier launch: tokens change (restore, reinstall, a new device),
/// and Herald's upsert makes a repeat free. On login or logout, ``setUser(_:assertion:)`` moves
/// every token this client registered to the new user (or to none).
///
/// What the client registered, the user, and the work Herald has not confirmed yet live in a
/// state file (``Persistence``): a registration that failed (no network, Herald down) stays
/// pending and is tried again on the next call or the next launch, with a capped back-off and no
/// attempt limit; the user set with ``setUser(_:assertion:)`` survives a relaunch. A refusal
/// (a 4xx with Herald's code, other than 429) is not retried: it is thrown, and the work dropped.
/// Cancelling the calling task ends a call with `CancellationError`; its work stays pending.
public final class HeraldClient: HeraldClientProtocol, Sendable {
    public let serverURL: URL
    public let appID: String
    let key: String
    private let retry: RetryPolicy
    let session: URLSession
    /// Receipts waiting to be sent (``flushReceipts(patience:)``).
    let receiptQueue: ReceiptQueue
    private let userAssertions: (@Sendable (_ userID: String, _ token: String) async throws -> String)?
    private let file: StateFile
    /// The state; saved to the file under the lock, so saves land in the order they were made.
    private let state: LockedBox<(state: RegistrationState, launchPassDone: Bool)>

    /// `userAssertions` asks the app's backend for a user assertion (a signed token saying the
    /// device holding `token`, in lowercase hex as Herald registers it, belongs to `userID`: the
    /// backend signs its hash as the `tkh` claim) whenever Herald needs one to bind a token to the
    /// user: a login, or a new token while signed in. When the backend cannot answer, the
    /// registration stays pending and is tried again with the others. Without it, pass assertions to ``register(_:_:userAssertion:)``
    /// and ``setUser(_:assertion:)`` yourself (a pending retry then cannot bind a user).
    /// `receiptQueueFile` keeps unsent receipts across launches (the same file in the app group
    /// for the app and its service extension).
    public init(
        serverURL: URL, appID: String, registerKey: String, retry: RetryPolicy = RetryPolicy(), session: URLSession = .shared,
        persistence: Persistence = .applicationSupport, userAssertions: (@Sendable (_ userID: String, _ token: String) async throws -> String)? = nil,
        receiptQueueFile: URL? = nil
    ) {
        self.receiptQueue = ReceiptQueue(file: receiptQueueFile)
        self.serverURL = serverURL
        self.appID = appID
        self.key = registerKey
        self.retry = retry
        self.session = session
        self.userAssertions = userAssertions
        self.file = StateFile(url: persistence.url)
        self.state = LockedBox((self.file.load(serverURL: serverURL.absoluteString, appID: appID), false))
    }

    /// The user ``setUser(_:assertion:)`` last set, as the state file remembers it.
    public var userID: String? { self.state.withLock { $0.state.userID } }

    /// Every token this client knows, with its pending work.
    public var registrations: [Registration] {
        self.state.withLock { state in
            state.state.entries.compactMap { entry in
                let status: Registration.Status =
                    switch entry.pending {
                    case nil: .registered
                    case .register?: .pendingRegistration
                    case .unregister?: .pendingRemoval
                    }
                return entry.pushToken.map { token in
                    Registration(token: token, details: entry.details.details, status: status, failures: entry.failures, lastError: entry.lastError)
                }
            }
        }
    }

    /// Registers (or refreshes) `token` with `details`; retried with back-off when the network
    /// or the server fails, thrown at once when Herald refuses it (a ``HeraldKitError`` with its
    /// code). A failure that is worth retrying leaves the registration pending: it is tried again
    /// on a later call or launch. Then tries other pending work that is due.
    ///
    /// `details.userID` nil means the client's user (``userID``). Binding the token to a user (a
    /// new token, or another user than it had) needs a user assertion from the app's backend:
    /// `userAssertion`, or one from the client's `userAssertions` when Herald asks for it.
    @discardableResult
    public func register(_ token: PushToken, _ details: DeviceDetails, userAssertion: String? = nil) async throws -> RegisteredDevice {
        var details = details
        self.mutate { state in
            if details.userID == nil { details.userID = state.userID }
            state.upsert(token, details, pending: .register)
        }
        let device = try await self.perform(
            token, work: .register, details: details, userAssertion: userAssertion, attempts: self.retry.maximumAttempts)
        await self.retryDue()
        return try device ?? { throw HeraldKitError(code: "bad_response", status: nil, message: "the registration answer is not a device") }()
    }

    /// Removes `token` from Herald (the user turned notifications off, or the app signs out
    /// for good). A token Herald does not know is not an error. Kept pending when it fails
    /// for want of a network or server.
    public func unregister(_ token: PushToken) async throws {
        self.mutate { state in
            let details = state.entries.first { $0.token == token.hex && $0.kind == token.kind }?.details.details
            state.upsert(token, details ?? DeviceDetails(environment: .production), pending: .unregister)
        }
        _ = try await self.perform(token, work: .unregister, details: nil, userAssertion: nil, attempts: self.retry.maximumAttempts)
        await self.retryDue()
    }

    /// Moves every token this client registered to `userID` (login), or to no user (logout, nil),
    /// and remembers the user across launches. A login needs the app's backend's user `assertion`
    /// for `userID` (or the client's `userAssertions`).
    public func setUser(_ userID: String?, assertion: String? = nil) async throws {
        let tokens = self.mutate { state -> [(PushToken, DeviceDetails)] in
            state.userID = userID
            for index in state.entries.indices where state.entries[index].pending != .unregister {
                state.entries[index].details.userID = userID
                state.entries[index].pending = .register
                state.entries[index].notBefore = nil
            }
            return state.entries.filter { $0.pending == .register }.compactMap { entry in entry.pushToken.map { ($0, entry.details.details) } }
        }
        for (token, details) in tokens {
            _ = try await self.perform(
                token, work: .register, details: details, userAssertion: userID == nil ? nil : assertion, attempts: self.retry.maximumAttempts)
        }
        await self.retryDue()
    }

    /// Tries the pending work now: everything at the first call after a launch, then what its
    /// back-off allows; one attempt each, stopping at the first that fails for want of a network
    /// or server. The number of registrations still pending. Throws only `CancellationError`.
    @discardableResult
    public func retryPending() async throws -> Int {
        await self.retryDue()
        try Task.checkCancellation()
        return self.state.withLock { $0.state.entries.filter { $0.pending != nil }.count }
    }

    private func retryDue() async {
        let now = Date()
        let due = self.state.withLock { state -> [RegistrationState.Entry] in
            let all = !state.launchPassDone
            state.launchPassDone = true
            return state.state.entries.filter { $0.pending != nil && (all || ($0.notBefore ?? .distantPast) <= now) }
        }
        for entry in due {
            guard let token = entry.pushToken, let work = entry.pending, !Task.isCancelled else { return }
            do {
                _ = try await self.perform(token, work: work, details: entry.details.details, userAssertion: nil, attempts: 1)
            } catch let error as HeraldKitError where error.isRetryable || error.code == "server_unavailable" {
                return  // still down: the rest waits too
            } catch {
                continue
            }
        }
    }

    /// Performs `work` for `token`, records the outcome in the state file; the device Herald
    /// answered for a registration.
    private func perform(
        _ token: PushToken, work: RegistrationState.Entry.Work, details: DeviceDetails?, userAssertion: String?, attempts: Int
    ) async throws -> RegisteredDevice? {
        do {
            let device: RegisteredDevice?
            switch work {
            case .register:
                device = try await self.put(
                    token, details ?? DeviceDetails(environment: .production), userAssertion: userAssertion, attempts: attempts)
            case .unregister:
                do {
                    _ = try await self.call(
                        "DELETE", "/v1/apps/\(self.appID)/devices/\(token.hex)", body: nil as DeviceRegistrationRequest?, attempts: attempts)
                } catch let error as HeraldKitError where error.status == 404 {
                    // Already gone.
                }
                device = nil
            }
            self.mutate { state in
                if work == .unregister {
                    state.remove(token)
                } else {
                    state.update(token) { entry in
                        (entry.pending, entry.failures, entry.notBefore, entry.lastError) = (nil, 0, nil, nil)
                    }
                }
            }
            return device
        } catch let error as HeraldKitError {
            // The backend not answering for an assertion is worth trying again, like Herald not answering:
            // the registration stays pending.
            let retryable = error.isRetryable || error.code == "server_unavailable" || error.code == "user_assertion_unavailable"
            self.mutate { state in
                if retryable {
                    state.update(token) { entry in
                        entry.failures += 1
                        entry.notBefore = Date().addingTimeInterval(self.retry.delay(after: entry.failures))
                        entry.lastError = error.code
                    }
                } else if work == .register {
                    state.remove(token)  // refused: trying again would be refused again
                } else {
                    state.update(token) { $0.pending = nil }
                }
            }
            throw error
        }
    }

    /// Refusals a fresh assertion from the app's backend answers: none given, one expired, one
    /// bound to no device or to another token.
    static let assertionWanted: Set<String> = [
        "user_assertion_required", "user_assertion_expired", "user_assertion_unbound", "user_assertion_wrong_device",
    ]

    private func put(_ token: PushToken, _ details: DeviceDetails, userAssertion: String?, attempts: Int) async throws -> RegisteredDevice {
        var body = DeviceRegistrationRequest(
            kind: token.kind, environment: details.environment.rawValue, userId: details.userID, tags: details.tags, locale: details.locale,
            timeZone: details.timeZone, appVersion: details.appVersion, platform: details.platform,
            publicKey: details.encryptionKey?.data.base64EncodedString(), publicKeyType: details.encryptionKey?.type
        )
        switch token {
        case .liveActivity(_, let activityID): body.activityId = activityID
        case .pushToStart(_, let attributesType): body.attributesType = attributesType
        default: break
        }
        body.userAssertion = userAssertion
        let path = "/v1/apps/\(self.appID)/devices/\(token.hex)"
        let answer: Data?
        do {
            answer = try await self.call("PUT", path, body: body, attempts: attempts)
        } catch let error as HeraldKitError where Self.assertionWanted.contains(error.code) {
            // Herald wants the backend's word for this user and this token: ask for it once, then try again.
            guard let provider = self.userAssertions, let user = details.userID else { throw error }
            do {
                body.userAssertion = try await provider(user, token.hex)
            } catch {
                if error is CancellationError || Task.isCancelled { throw CancellationError() }
                throw HeraldKitError(code: "user_assertion_unavailable", status: nil, message: "the app's backend gave no user assertion: \(error)")
            }
            answer = try await self.call("PUT", path, body: body, attempts: attempts)
        }
        guard let answer, let device = try? JSONDecoder().decode(DeviceResponse.self, from: answer) else {
            throw HeraldKitError(code: "bad_response", status: nil, message: "the registration answer is not a device")
        }
        return RegisteredDevice(
            token: device.token, kind: device.kind, userID: device.userId, active: device.active, lastRegisteredAt: device.lastRegisteredAt
        )
    }

    @discardableResult
    private func mutate<T>(_ body: (inout RegistrationState) -> T) -> T {
        self.state.withLock { state in
            let result = body(&state.state)
            self.file.save(state.state)  // small; under the lock so that saves land in order
            return result
        }
    }

    /// One call, retried per the policy (at most `attempts`); the answer's bytes (nil for an
    /// empty answer). Throws `CancellationError` when the task is cancelled.
    private func call(_ method: String, _ path: String, body: (some Encodable)?, attempts: Int) async throws -> Data? {
        var request = URLRequest(url: self.serverURL.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(self.key)", forHTTPHeaderField: "authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "content-type")
            request.httpBody = try? JSONEncoder().encode(body)
        }
        var attempt = 1
        while true {
            try Task.checkCancellation()
            do {
                return try await self.once(request)
            } catch let error as HeraldKitError where error.isRetryable && attempt < attempts {
                try await Task.sleep(nanoseconds: UInt64(self.retry.delay(after: attempt) * 1_000_000_000))
                attempt += 1
            } catch let error as HeraldKitError where error.isRetryable && error.code != "network" {
                throw HeraldKitError(code: "server_unavailable", status: error.status, message: "\(error.message) (after \(attempt) attempts)")
            }
        }
    }

    private func once(_ request: URLRequest) async throws -> Data? {
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await self.session.data(for: request)
        } catch {
            if error is CancellationError || (error as? URLError)?.code == .cancelled || Task.isCancelled { throw CancellationError() }
            throw HeraldKitError(code: "network", status: nil, message: error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else { throw HeraldKitError(code: "bad_response", status: nil, message: "not HTTP") }
        guard (200..<300).contains(http.statusCode) else {
            let error = try? JSONDecoder().decode(APIErrorBody.self, from: data).error
            throw HeraldKitError(
                code: error?.code ?? "http_\(http.statusCode)", status: http.statusCode,
                message: error?.message ?? HTTPURLResponse.localizedString(forStatusCode: http.statusCode)
            )
        }
        return data.isEmpty ? nil : data
    }
}
