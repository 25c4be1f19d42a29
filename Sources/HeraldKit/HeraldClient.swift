// SPDX-License-Identifier: Apache-2.0
public import Foundation
import Synchronization

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Why a call to Herald failed, with Herald's stable error code (`bad_device_token`,
/// `forbidden`, …) or one of HeraldKit's own: `network` (no answer), `server_unavailable`
/// (429/5xx after every retry), `bad_response` (an answer that is not Herald's JSON).
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

/// How often and how patiently the client tries again when the network or the server fails.
public struct RetryPolicy: Sendable, Hashable {
    public var maximumAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration

    public init(maximumAttempts: Int = 6, initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(30)) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1): doubling, capped, with
    /// jitter ×0.5–1 so that many devices failing together do not come back together.
    func delay(after attempt: Int) -> Duration {
        let doubled = self.initialDelay * (1 << min(attempt - 1, 20))
        let capped = min(doubled, self.maximumDelay)
        return capped * Double.random(in: 0.5...1)
    }
}

/// Registers the app's push tokens with a Herald server, with a `register`-scoped key — the
/// only kind of key that may ship inside an app: it can register and unregister this app's
/// devices and nothing else.
///
/// Call ``register(_:_:)`` at every launch with the token the system just handed over, never one
/// saved from an earlier launch: tokens change (restore, reinstall, a new device), and Herald's
/// upsert makes a repeat free. On login or logout, ``setUser(_:)`` moves every token this client
/// registered to the new user (or to none).
public final class HeraldClient: Sendable {
    public let serverURL: URL
    public let appID: String
    let key: String
    private let retry: RetryPolicy
    let session: URLSession
    /// Receipts waiting to be sent (``flushReceipts()``).
    let receiptQueue: ReceiptQueue
    private let userAssertions: (@Sendable (_ userID: String) async throws -> String)?
    /// What this client registered, so a login or logout can move it.
    private let registered = Mutex<[PushToken: DeviceDetails]>([:])

    /// `userAssertions` asks the app's backend for a user assertion (a signed token saying this
    /// device's user is `userID`) whenever Herald needs one to bind a token to the user: a login,
    /// or a new token while signed in. Without it, pass assertions to ``register(_:_:userAssertion:)``
    /// and ``setUser(_:assertion:)`` yourself. `receiptQueueFile` keeps unsent receipts across
    /// launches (the same file in the app group for the app and its service extension).
    public init(
        serverURL: URL, appID: String, registerKey: String, retry: RetryPolicy = RetryPolicy(), session: URLSession = .shared,
        userAssertions: (@Sendable (_ userID: String) async throws -> String)? = nil, receiptQueueFile: URL? = nil
    ) {
        self.receiptQueue = ReceiptQueue(file: receiptQueueFile)
        self.serverURL = serverURL
        self.appID = appID
        self.key = registerKey
        self.retry = retry
        self.session = session
        self.userAssertions = userAssertions
    }

    /// Registers (or refreshes) `token` with `details`; retried with back-off when the network
    /// or the server fails, thrown at once when Herald refuses it (a 4xx with its code).
    ///
    /// Binding the token to `details.userID` (a new token, or another user than it had) needs a
    /// user assertion from the app's backend: `userAssertion`, or one from the client's
    /// `userAssertions` when Herald asks for it.
    @discardableResult
    public func register(_ token: PushToken, _ details: DeviceDetails, userAssertion: String? = nil) async throws(HeraldKitError) -> RegisteredDevice
    {
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
            answer = try await self.call("PUT", path, body: body)
        } catch  where ["user_assertion_required", "user_assertion_expired"].contains(error.code) {
            // Herald wants the backend's word for this user: ask for it once, then try again.
            guard let provider = self.userAssertions, let user = details.userID else { throw error }
            do {
                body.userAssertion = try await provider(user)
            } catch is CancellationError {
                throw HeraldKitError(code: "cancelled", status: nil, message: "cancelled while asking for a user assertion")
            } catch {
                throw HeraldKitError(code: "user_assertion_unavailable", status: nil, message: "the app's backend gave no user assertion: \(error)")
            }
            answer = try await self.call("PUT", path, body: body)
        }
        guard let answer, let device = try? JSONDecoder().decode(DeviceResponse.self, from: answer) else {
            throw HeraldKitError(code: "bad_response", status: nil, message: "the registration answer is not a device")
        }
        self.registered.withLock { $0[token] = details }
        return RegisteredDevice(
            token: device.token, kind: device.kind, userID: device.userId, active: device.active, lastRegisteredAt: device.lastRegisteredAt
        )
    }

    /// Removes `token` from Herald (the user turned notifications off, or the app signs out
    /// for good). A token Herald does not know is not an error.
    public func unregister(_ token: PushToken) async throws(HeraldKitError) {
        do {
            _ = try await self.call("DELETE", "/v1/apps/\(self.appID)/devices/\(token.hex)", body: nil as DeviceRegistrationRequest?)
        } catch  where error.status == 404 {
            // Already gone.
        }
        self.registered.withLock { _ = $0.removeValue(forKey: token) }
    }

    /// Moves every token this client registered to `userID` (login), or to no user (logout, nil).
    /// A login needs the app's backend's user `assertion` for `userID` (or the client's `userAssertions`).
    public func setUser(_ userID: String?, assertion: String? = nil) async throws(HeraldKitError) {
        let tokens = self.registered.withLock { $0 }
        for (token, var details) in tokens {
            details.userID = userID
            try await self.register(token, details, userAssertion: userID == nil ? nil : assertion)
        }
    }

    /// One call, retried per the policy; the answer's bytes (nil for an empty answer).
    private func call(_ method: String, _ path: String, body: (some Encodable)?) async throws(HeraldKitError) -> Data? {
        var request = URLRequest(url: self.serverURL.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("Bearer \(self.key)", forHTTPHeaderField: "authorization")
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "content-type")
            request.httpBody = try? JSONEncoder().encode(body)
        }
        var attempt = 1
        while true {
            do {
                return try await self.once(request)
            } catch  where error.isRetryable && attempt < self.retry.maximumAttempts {
                try? await Task.sleep(for: self.retry.delay(after: attempt))
                attempt += 1
            } catch {
                if error.isRetryable, error.code != "network" {
                    throw HeraldKitError(code: "server_unavailable", status: error.status, message: "\(error.message) (after \(attempt) attempts)")
                }
                throw error
            }
        }
    }

    private func once(_ request: URLRequest) async throws(HeraldKitError) -> Data? {
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await self.session.data(for: request)
        } catch {
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
