// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto
import HeraldCore
import Testing

@Suite struct ReceiptIDTests {
    let ids = ReceiptID(keys: [Array(repeating: 7, count: 32)])

    @Test("a receipt id names one delivery of one app, and nothing else verifies")
    func verify() {
        let id = self.ids.id(appID: "demo", deliveryID: 42)
        #expect(id.utf8.count == ReceiptID.length)
        #expect(self.ids.deliveryID(id, appID: "demo") == 42)
        #expect(self.ids.deliveryID(id, appID: "other") == nil, "another app's")
        #expect(ReceiptID(keys: [Array(repeating: 8, count: 32)]).deliveryID(id, appID: "demo") == nil, "another server's key")
        // Every single-character change of the id is refused.
        let characters = Array(id)
        for position in characters.indices {
            var forged = characters
            forged[position] = forged[position] == "A" ? "B" : "A"
            #expect(self.ids.deliveryID(String(forged), appID: "demo") == nil, "position \(position)")
        }
        #expect(self.ids.deliveryID("", appID: "demo") == nil)
        #expect(self.ids.deliveryID(String(repeating: "A", count: 27), appID: "demo") == nil)
        // A key replaced (a change of master key): ids signed before still verify.
        let rotated = ReceiptID(keys: [Array(repeating: 9, count: 32), Array(repeating: 7, count: 32)])
        #expect(rotated.deliveryID(id, appID: "demo") == 42)
    }

    @Test("an id is the delivery id and the first 12 bytes of HMAC-SHA256 over the app id, a zero and the delivery id")
    func knownAnswer() {
        let key = SymmetricKey(data: Array(repeating: UInt8(7), count: 32))
        for deliveryID: Int64 in [42, 43, 42, 1 << 40] {
            let bytes = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(deliveryID) >> (56 - 8 * UInt64($0))) }
            let mac = HMAC<SHA256>.authenticationCode(for: Array("demo".utf8) + [0] + bytes, using: key)
            #expect(self.ids.id(appID: "demo", deliveryID: deliveryID) == Base64URL.encode(bytes + Array(mac.prefix(12))))
        }
    }

    @Test("the id is spliced into the encoded payload as hr, with exactly the overhead reserved at acceptance")
    func splice() throws {
        let id = self.ids.id(appID: "demo", deliveryID: 1)
        let payload = Array(#"{"aps":{"alert":"hi"},"k":1}"#.utf8)
        let spliced = try #require(ReceiptID.splice(payload, id: id))
        #expect(spliced.count == payload.count + ReceiptID.payloadOverhead)
        let json = try JSONValue.parse(spliced)
        #expect(json["hr"]?.stringValue == id && json["k"] != nil && json["aps"] != nil)
        #expect(ReceiptID.splice(Array("{}".utf8), id: id).map { String(decoding: $0, as: UTF8.self) } == #"{"hr":"\#(id)"}"#)
        #expect(ReceiptID.splice(Array("[1]".utf8), id: id) == nil)
    }
}
