// SPDX-License-Identifier: Apache-2.0

/// `POST /v1/apps/{app}/receipts` (register key and above): what devices report about the pushes
/// they got, 1 to ``ReceiptBatch/limit`` items at once.
public struct ReceiptBatch: Sendable, Hashable, Codable {
    /// The most items a batch may hold.
    public static let limit = 500
    /// The custom payload key (beside `aps`) that carries a push's receipt id.
    public static let payloadKey = "hr"

    public var receipts: [ReceiptItem]

    public init(receipts: [ReceiptItem]) {
        self.receipts = receipts
    }
}

/// One report: the push's receipt id (its payload's `hr`), what happened, when.
public struct ReceiptItem: Sendable, Hashable, Codable {
    public var receipt: String
    /// `received` (the push reached the device) or `opened` (the user opened it).
    public var event: String
    /// With `opened`: the action chosen (its identifier, up to 64 bytes); none for a plain open.
    public var action: String?
    /// When, in milliseconds since 1970 (default: when Herald gets it; never later than that).
    public var at: Int64?

    public init(receipt: String, event: String, action: String? = nil, at: Int64? = nil) {
        self.receipt = receipt
        self.event = event
        self.action = action
        self.at = at
    }
}

/// The answer to a batch: how many items changed something, how many were reported before (a
/// replay: the first report stands), and the items refused, by index, with a stable code:
/// `receipt_invalid` (not a receipt id of this app: never retry), `delivery_unknown` (a valid
/// id whose delivery Herald has not recorded yet, or pruned: retry later), `bad_event`, `bad_action`.
public struct ReceiptBatchResponse: Sendable, Hashable, Codable {
    public var applied: Int
    public var duplicates: Int
    public var refused: [RefusedReceipt]

    public init(applied: Int, duplicates: Int, refused: [RefusedReceipt]) {
        self.applied = applied
        self.duplicates = duplicates
        self.refused = refused
    }
}

/// An item of a batch that was refused.
public struct RefusedReceipt: Sendable, Hashable, Codable {
    public var index: Int
    public var code: String

    public init(index: Int, code: String) {
        self.index = index
        self.code = code
    }
}

/// A notification's funnel: sent (APNs accepted), received (the device reported it), opened.
public struct NotificationFunnel: Sendable, Hashable, Codable {
    public var sent: Int
    public var received: Int
    public var opened: Int

    public init(sent: Int, received: Int, opened: Int) {
        self.sent = sent
        self.received = received
        self.opened = opened
    }
}
