// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore

extension NotificationRequest {
    /// A checked notification as the app takes it, by the API or the dashboard, stored or
    /// broadcast: its receipt id's room reserved (``reserveReceipt(_:app:)``) and the app's
    /// delivery policies adopted.
    static func admit(_ spec: inout NotificationSpec, app: App) throws {
        try Self.reserveReceipt(spec, app: app)
        spec.adoptPolicies(app.security)
    }

    /// For an app whose pushes carry receipt ids: the id's bytes (`,"hr":"…"`, 35) must fit
    /// within the payload limit too, checked at acceptance like every other size rule.
    static func reserveReceipt(_ spec: NotificationSpec, app: App) throws {
        guard app.security.receipts, spec.pushType == nil || spec.pushType == .alert || spec.pushType == .background else { return }
        let limit = (spec.pushType ?? .alert).maximumPayloadSize
        var size = spec.payload.count
        if let placeholder = spec.placeholder {
            size = placeholder.count + EncryptedPayload.key.utf8.count + 4 + EncryptedPayload.envelopeSize(payloadBytes: spec.payload.count)
        }
        guard size + ReceiptID.payloadOverhead <= limit else {
            throw HeraldError.unprocessable(
                "the payload is \(size) bytes and its receipt id adds \(ReceiptID.payloadOverhead); the limit is \(limit) (or turn the app's receipts off)",
                code: "payload_too_large"
            )
        }
    }
}
