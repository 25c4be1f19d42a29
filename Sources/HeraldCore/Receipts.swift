// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Crypto

/// What a device reports about a delivery: the push reached it (its notification service
/// extension ran), or the user opened it (with the action chosen, if any).
package enum ReceiptEvent: String, Sendable, Hashable, CaseIterable {
    case received
    case opened
}

/// One item of a receipt batch, its receipt id verified (``ReceiptID``).
package struct ReceiptReport: Sendable, Hashable {
    /// Its position in the batch, to answer which items were refused.
    package var index: Int
    package var deliveryID: Int64
    package var event: ReceiptEvent
    /// The action chosen (an `opened` event only).
    package var action: String?
    /// When it happened on the device (ms).
    package var at: Int64

    package init(index: Int, deliveryID: Int64, event: ReceiptEvent, action: String? = nil, at: Int64) {
        self.index = index
        self.deliveryID = deliveryID
        self.event = event
        self.action = action
        self.at = at
    }
}

/// A report that changed its delivery: what the events (SSE, webhooks) tell.
package struct AppliedReceipt: Sendable, Hashable {
    package var index: Int
    package var deliveryID: Int64
    package var notificationID: String
    package var token: String
    package var event: ReceiptEvent
    package var action: String?
    package var at: Int64

    package init(_ report: ReceiptReport, notificationID: String, token: String) {
        self.index = report.index
        self.deliveryID = report.deliveryID
        self.notificationID = notificationID
        self.token = token
        self.event = report.event
        self.action = report.action
        self.at = report.at
    }
}

/// What a batch of reports did, by item.
package struct ReceiptOutcomes: Sendable, Hashable {
    package var applied: [AppliedReceipt] = []
    /// Reported before: nothing changed (the first `receivedAt`/`openedAt` stands).
    package var duplicates: [Int] = []
    /// No delivery of this app has the id (yet): it is recorded once APNs answered, so a device
    /// may report before the row exists; or it was pruned.
    package var unknown: [Int] = []

    package init(applied: [AppliedReceipt] = [], duplicates: [Int] = [], unknown: [Int] = []) {
        self.applied = applied
        self.duplicates = duplicates
        self.unknown = unknown
    }
}

/// A notification's funnel beyond its delivery states: how many of its deliveries the devices
/// reported received, and opened.
package struct ReceiptCounts: Sendable, Hashable {
    package var received: Int
    package var opened: Int

    package init(received: Int, opened: Int) {
        self.received = received
        self.opened = opened
    }
}

/// Where receipts are kept: per delivery `received_at`, `opened_at`, `action`; per notification
/// the counts of its funnel (kept up to date by each batch, never counted by a scan).
package protocol ReceiptStore: Sendable {
    /// Applies the reports in one transaction, in order (``ReceiptPolicy``), to the app's deliveries only.
    func recordReceipts(appID: String, _ reports: [ReceiptReport], now: Int64) async throws -> ReceiptOutcomes
    /// The funnel counts of one of the app's notifications; nil when there is none.
    func receiptCounts(appID: String, notificationID: String) async throws -> ReceiptCounts?
}

/// The SQL-free decision both drivers apply to each report, given what its delivery holds.
package enum ReceiptPolicy {
    package struct Change: Sendable, Hashable {
        /// Set `received_at` (and count it).
        package var receivedAt: Int64?
        /// Set `opened_at` and `action` (and count it).
        package var openedAt: Int64?
        package var action: String?
    }

    /// Nil when the report changes nothing (a replay: the first report stands). An open implies
    /// the push was received (the extension does not run for every push), so it sets both.
    package static func change(_ report: ReceiptReport, receivedAt: Int64?, openedAt: Int64?) -> Change? {
        switch report.event {
        case .received:
            guard receivedAt == nil else { return nil }
            return Change(receivedAt: report.at)
        case .opened:
            guard openedAt == nil else { return nil }
            return Change(receivedAt: receivedAt == nil ? report.at : nil, openedAt: report.at, action: report.action)
        }
    }

    /// Per notification: how many received and opened the changes add.
    package static func tally(_ changes: [(notificationID: String, change: Change)]) -> [String: ReceiptCounts] {
        var counts: [String: ReceiptCounts] = [:]
        for (id, change) in changes {
            counts[id, default: ReceiptCounts(received: 0, opened: 0)].received += change.receivedAt == nil ? 0 : 1
            counts[id, default: ReceiptCounts(received: 0, opened: 0)].opened += change.openedAt == nil ? 0 : 1
        }
        return counts
    }
}

/// A receipt id: `base64url(delivery id ‖ HMAC-SHA256(app id ‖ delivery id)[0..<12])`, 27
/// characters. The key is derived from the master key (only the server holds it), so the id
/// is checked without anything stored per delivery, cannot be guessed for a delivery not sent
/// to the device, and names one delivery of one app.
package struct ReceiptID: Sendable {
    /// The HKDF purpose of the key.
    static let purpose = "herald receipt id v1"
    static let macBytes = 12
    /// The length of an id (20 bytes in base64url).
    package static let length = 27
    /// The custom payload key that carries it, beside `aps`.
    package static let payloadKey = "hr"
    /// What it adds to a payload: `,"hr":"<27>"`.
    package static let payloadOverhead = 8 + length

    /// The first signs; any verifies (a change of master key under way). Each with its key
    /// already absorbed, so an id costs the hashing of its own message only: a broadcast makes
    /// one per delivery.
    private let keys: [KeyedHMACSHA256]

    package init(keys: [[UInt8]]) {
        self.keys = keys.map(KeyedHMACSHA256.init(key:))
    }

    package init(secrets: SecretBox) {
        self.init(keys: secrets.derivedKeys(purpose: Self.purpose))
    }

    /// HMAC-SHA256 over the app id, a zero and the delivery id (big-endian), fed to the hash
    /// piece by piece: no message is put together. Made once per delivery sent.
    private static func mac(appID: String, deliveryID: Int64, key: KeyedHMACSHA256) -> SHA256Digest {
        key.code { hash in
            var appID = appID
            appID.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            withUnsafeBytes(of: UInt8(0)) { hash.update(bufferPointer: $0) }
            withUnsafeBytes(of: deliveryID.bigEndian) { hash.update(bufferPointer: $0) }
        }
    }

    /// The id of `deliveryID` of `appID`: its 8 bytes and the MAC's first 12, on the stack.
    package func id(appID: String, deliveryID: Int64) -> String {
        guard let key = self.keys.first else { return "" }
        let mac = Self.mac(appID: appID, deliveryID: deliveryID, key: key)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 8 + Self.macBytes) { id in
            withUnsafeBytes(of: deliveryID.bigEndian) { for index in 0..<8 { id[index] = $0[index] } }
            mac.withUnsafeBytes { for index in 0..<Self.macBytes { id[8 + index] = $0[index] } }
            return Base64URL.encode(UnsafeBufferPointer(id))
        }
    }

    /// The delivery `receipt` names, if it is a valid id of `appID`'s; nil for anything else
    /// (malformed, another app's, a forged MAC).
    package func deliveryID(_ receipt: String, appID: String) -> Int64? {
        guard receipt.utf8.count == Self.length, let bytes = Base64URL.decode(receipt), bytes.count == 8 + Self.macBytes else { return nil }
        let id = bytes[0..<8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        guard id > 0 else { return nil }
        let given = bytes[8...]
        for key in self.keys {
            let expected = Self.mac(appID: appID, deliveryID: id, key: key).prefix(Self.macBytes)
            // Constant time: every byte is compared.
            if zip(expected, given).reduce(UInt8(0), { $0 | ($1.0 ^ $1.1) }) == 0 { return id }
        }
        return nil
    }

    /// `payload` (a JSON object) with the id spliced in before its closing brace: no re-encoding,
    /// so a broadcast's one encoded payload serves every device. Nil when it does not end in `}`.
    package static func splice(_ payload: [UInt8], id: String) -> [UInt8]? {
        guard let last = payload.lastIndex(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), payload[last] == UInt8(ascii: "}")
        else { return nil }
        let before = payload[..<last].last(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 })
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + Self.payloadOverhead)
        out.append(contentsOf: payload[..<last])
        if before != UInt8(ascii: "{") { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: #""hr":""#.utf8)
        out.append(contentsOf: id.utf8)
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: "}"))
        return out
    }
}
