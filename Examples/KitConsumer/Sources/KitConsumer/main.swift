// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldKit

// What an app does with HeraldKit, compiled against HeraldKit's public API alone:
//   swift run --package-path Examples/KitConsumer KitConsumer [SERVER-URL APP-ID REGISTER-KEY]
// With a server, it registers a token; without, it only seals and opens a payload locally.

// End-to-end encryption: the device's key pair; a payload sealed to its public half opens with
// the private half.
let privateKey = EncryptedPayload.PrivateKey.x25519(.init())
let secret = #"{"aps":{"alert":{"title":"Ann","body":"Dinner at 8?"},"badge":3,"sound":"default"}}"#
let envelope = try EncryptedPayload.sealedJSON(Data(secret.utf8), type: "x25519", publicKey: privateKey.publicKey.data)
let opened = try EncryptedPayload.open(JSONDecoder().decode(PayloadValue.self, from: Data(envelope.utf8)), with: privateKey)
let content = try NotificationContent(payload: opened)
print("opened: \(content.title): \(content.body) (badge \(content.badge ?? 0), sound \(content.sound ?? "none"))")

let arguments = CommandLine.arguments.dropFirst()
if arguments.count == 3, let url = URL(string: arguments[arguments.startIndex]) {
    let client = HeraldClient(
        serverURL: url, appID: arguments[arguments.startIndex + 1], registerKey: arguments[arguments.startIndex + 2])
    let token = PushToken.device(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
    let device = try await client.register(token, DeviceDetails(environment: .sandbox, platform: "KitConsumer"))
    print("registered \(device.token) (\(device.kind))")
}
