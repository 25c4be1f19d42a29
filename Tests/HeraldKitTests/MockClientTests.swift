// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldKit
import HeraldKitTesting
import Testing

/// An app's own code and tests, as HeraldKitTesting serves them: the app depends on
/// `HeraldClientProtocol`; its tests hand in `MockHeraldClient`.
@Suite struct MockClientTests {
    /// The app's code under test: forwards tokens, signs in and out.
    struct PushModel {
        var herald: any HeraldClientProtocol

        /// What the app shows: registered, or why not.
        func didReceive(deviceToken: Data) async -> String {
            do {
                let device = try await self.herald.register(.device(deviceToken), DeviceDetails(environment: .sandbox, locale: nil, timeZone: nil))
                return "registered \(device.token)"
            } catch let error as HeraldKitError {
                return "not registered: \(error.code)"
            } catch {
                return "not registered"
            }
        }

        func signIn(_ user: String) async throws { try await self.herald.setUser(user) }
        func signOut() async throws { try await self.herald.setUser(nil) }
    }

    @Test("the double records the app's calls, answers them, and throws what the test says")
    func mock() async throws {
        let herald = MockHeraldClient()
        let model = PushModel(herald: herald)
        #expect(await model.didReceive(deviceToken: Data([0xAB, 0xCD])) == "registered abcd")
        try await model.signIn("ann")
        #expect(herald.registered[.device(Data([0xAB, 0xCD]))]?.userID == "ann")
        try await model.signOut()
        #expect(herald.userID == nil)

        herald.failure = HeraldKitError(code: "network", status: nil, message: "offline")
        #expect(await model.didReceive(deviceToken: Data([0x01])) == "not registered: network")
        #expect(
            herald.calls == [
                .register(.device(Data([0xAB, 0xCD])), userID: nil), .setUser("ann"), .setUser(nil), .register(.device(Data([0x01])), userID: nil),
            ])
        herald.failure = CancellationError()
        await #expect(throws: CancellationError.self) { try await herald.unregister(.device(Data([0xAB, 0xCD]))) }
    }

    @Test("results have public initialisers, and the real client is a HeraldClientProtocol")
    func results() throws {
        let device = RegisteredDevice(token: "abcd", kind: "device", userID: "ann", active: true, lastRegisteredAt: 1)
        let registration = Registration(token: .voip(Data([1])), details: DeviceDetails(environment: .production), status: .pendingRegistration)
        let error = HeraldKitError(code: "forbidden", status: 403, message: "no")
        let alert = ReceivedNotification.Alert(title: "Hi", body: "there")
        #expect(device.userID == "ann" && registration.failures == 0 && !error.isRetryable && alert.subtitle == nil)
        let client: any HeraldClientProtocol = HeraldClient(
            serverURL: try #require(URL(string: "http://127.0.0.1:9")), appID: "demo", registerKey: "hk_x", persistence: .memoryOnly)
        #expect(client is HeraldClient)
    }
}
