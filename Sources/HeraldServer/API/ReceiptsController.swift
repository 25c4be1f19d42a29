// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore
import Hummingbird

/// `POST /v1/apps/{app}/receipts` (register keys, the ones inside apps, and above): devices
/// report pushes received and opened. Each receipt id is checked without the database
/// (``ReceiptID``: a forged one, or another app's, is refused and changes nothing); a batch is
/// one transaction; a replay changes nothing (the first report stands). Rate-limited as
/// registration is.
struct ReceiptsController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock
    let events: DeliveryEvents
    var rateLimit: RateLimitGate?

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        v1.group("apps/:app/receipts").add(middleware: RateLimit(operation: .receipt, gate: self.rateLimit))
            .add(middleware: RequireScope(.register, store: self.store, clock: self.clock))
            .post(use: self.report)
    }

    /// Why one item of a batch was refused: codes per item in a 200, never an error's.
    enum Refusal: String {
        /// Not a receipt id of this app (forged, another app's, made up): never retry.
        case receiptInvalid = "receipt_invalid"
        /// A valid id whose delivery is not recorded yet (or was pruned): retry later.
        case deliveryUnknown = "delivery_unknown"
        case badEvent = "bad_event"
        case badAction = "bad_action"
    }

    /// How far back a report's `at` may be (30 days, as long as APNs keeps a push); older, or
    /// later than now, is taken as now.
    static let horizon: Int64 = 30 * 86_400_000

    @Sendable func report(_ request: Request, context: APIRequestContext) async throws -> ReceiptBatchResponse {
        let app = try context.requireApp()
        guard app.security.receipts else {
            throw HeraldError(code: "receipts_disabled", "this app's pushes carry no receipt ids (the app setting receipts is off)")
        }
        let batch = try await request.decode(as: ReceiptBatch.self, context: context)
        guard (1...ReceiptBatch.limit).contains(batch.receipts.count) else {
            throw HeraldError.invalid("receipts holds 1 to \(ReceiptBatch.limit) items", code: "bad_receipts")
        }
        let now = self.clock.nowMilliseconds
        let ids = ReceiptID(secrets: self.secrets)
        var reports: [ReceiptReport] = []
        reports.reserveCapacity(batch.receipts.count)
        var refused: [RefusedReceipt] = []
        for (index, item) in batch.receipts.enumerated() {
            guard let event = ReceiptEvent(rawValue: item.event) else {
                refused.append(RefusedReceipt(index: index, code: Refusal.badEvent.rawValue))
                continue
            }
            if let action = item.action, event != .opened || action.isEmpty || action.utf8.count > 64 {
                refused.append(RefusedReceipt(index: index, code: Refusal.badAction.rawValue))
                continue
            }
            guard let deliveryID = ids.deliveryID(item.receipt, appID: app.id) else {
                refused.append(RefusedReceipt(index: index, code: Refusal.receiptInvalid.rawValue))
                continue
            }
            let at = item.at.map { $0 > now || $0 < now - Self.horizon ? now : $0 } ?? now
            reports.append(ReceiptReport(index: index, deliveryID: deliveryID, event: event, action: item.action, at: at))
        }
        let outcomes = try await self.store.recordReceipts(appID: app.id, reports, now: now)
        refused += outcomes.unknown.map { RefusedReceipt(index: $0, code: Refusal.deliveryUnknown.rawValue) }
        refused.sort { $0.index < $1.index }
        await self.events.receipts(appID: app.id, outcomes, refused: refused.count - outcomes.unknown.count)
        return ReceiptBatchResponse(applied: outcomes.applied.count, duplicates: outcomes.duplicates.count, refused: refused)
    }
}
