// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator
import APNSModels
import HeraldTesting

extension EmulatorFixture {
    /// A client configuration for this emulator's development port, trusting its CA, signing
    /// with the fixture's key. Its deadline is 30 s, far from what a fault costs even on a
    /// machine loaded with every suite; a test of deadlines sets its own.
    func clientConfiguration(port: Int? = nil) -> APNSClientConfiguration {
        var configuration = APNSClientConfiguration(
            credential: .token(self.key),
            environment: .development,
            host: "127.0.0.1",
            port: port ?? self.emulator.ports[.development]!,
            trustRoots: .pemFile(self.caFile)
        )
        configuration.requestTimeout = .seconds(30)
        return configuration
    }

    /// Runs `body` with a client on this emulator, moving its clock with the emulator's.
    func withClient<Result>(
        configure: (inout APNSClientConfiguration) -> Void = { _ in },
        _ body: (APNSClient) async throws -> Result
    ) async throws -> Result {
        var configuration = self.clientConfiguration()
        configure(&configuration)
        return try await withAPNSClient(configuration: configuration, clock: self.clock, body)
    }
}

/// An alert to `token`.
func alert(_ token: String, body: String = #"{"aps":{"alert":{"title":"Hi","body":"there"}}}"#, apnsID: String? = nil) throws -> APNSRequest {
    APNSRequest(
        deviceToken: try DeviceToken(hex: token),
        headers: NotificationHeaders(pushType: .alert, topic: EmulatorFixture.bundleID, apnsID: apnsID),
        payload: Array(body.utf8)
    )
}

/// `count` requests as an async sequence.
func sequence(_ requests: [APNSRequest]) -> AsyncStream<APNSRequest> {
    AsyncStream { continuation in
        for request in requests { continuation.yield(request) }
        continuation.finish()
    }
}

extension APNSClient {
    /// Sends all of `requests` through the bulk API and returns the outcomes.
    func sendAll(_ requests: [APNSRequest], maxInFlight: Int? = nil) async throws -> [APNSOutcome] {
        var outcomes: [APNSOutcome] = []
        try await self.send(sequence(requests), maxInFlight: maxInFlight) { outcomes.append($0) }
        return outcomes
    }
}

/// The client error `body` throws, or nil when it succeeds (or throws something else).
func clientError(_ body: () async throws -> Any) async -> APNSClientError? {
    do {
        _ = try await body()
        return nil
    } catch let error as APNSClientError {
        return error
    } catch {
        return nil
    }
}
