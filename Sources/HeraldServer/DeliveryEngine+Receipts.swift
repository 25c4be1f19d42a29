// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldCore

extension DeliveryEngine {
    /// The signer of `appID`'s receipt ids for one batch; nil when its pushes carry none (the
    /// app turned receipts off, or this engine has no master key).
    func receiptIDs(appID: String) async -> ReceiptID? {
        guard let secrets = self.secrets, let app = try? await self.store.app(appID), app.security.receipts else { return nil }
        return ReceiptID(secrets: secrets)
    }

    /// `payload` with `delivery`'s receipt id spliced in as `"hr"` (alert and background pushes,
    /// which a device can report): the notification's bytes, encoded once, plus 35 bytes.
    static func withReceipt(_ payload: [UInt8], _ delivery: ClaimedDelivery, _ receipts: ReceiptID?) -> [UInt8] {
        guard let receipts, delivery.pushType == .alert || delivery.pushType == .background else { return payload }
        return ReceiptID.splice(payload, id: receipts.id(appID: delivery.appID, deliveryID: delivery.id)) ?? payload
    }
}
