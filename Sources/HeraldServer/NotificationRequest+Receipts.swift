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

/// What a dry run and the dashboard's preview show of what each device will get: the headers
/// and payload as the delivery engine makes them, with what it makes per delivery named by a
/// placeholder of the same size.
enum SentForm {
    /// The collapse id every push carries when the sender gives none: its notification's id
    /// (so a resend replaces on the device), which a dry run has not made.
    static let collapsePlaceholder = "<notification id>"
    /// Stands for a delivery's receipt id: as many bytes as one (``ReceiptID/length``), so the
    /// payload's size shown is the size sent.
    static let receiptPlaceholder = "<receipt id of each device>"

    static func collapseID(_ spec: NotificationSpec) -> String { spec.collapseID ?? Self.collapsePlaceholder }

    /// `payload` as a push of `pushType` of `app` carries it: with its receipt id where the app's
    /// pushes carry one (alert and background pushes).
    static func payload(_ payload: [UInt8], pushType: PushType, app: App) -> [UInt8] {
        guard app.security.receipts, pushType == .alert || pushType == .background else { return payload }
        return ReceiptID.splice(payload, id: Self.receiptPlaceholder) ?? payload
    }
}
