// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics
import HeraldCore

extension DeliveryEvents {
    /// Called once a batch of receipts is committed: `delivery.received` and `delivery.opened`
    /// for what changed (a replay changes nothing and tells nothing), to SSE subscribers and
    /// webhooks, and the counters at `/metrics` (`herald_receipts_total{app, event, result}`).
    func receipts(appID: String, _ outcomes: ReceiptOutcomes, refused: Int) async {
        let applied = outcomes.applied
        for event in ReceiptEvent.allCases {
            let count = applied.count(where: { $0.event == event })
            if count > 0 {
                Counter(label: "herald_receipts_total", dimensions: [("app", appID), ("event", event.rawValue), ("result", "applied")])
                    .increment(by: Int64(count))
            }
        }
        for (result, count) in [("duplicate", outcomes.duplicates.count), ("unknown", outcomes.unknown.count), ("refused", refused)] where count > 0 {
            Counter(label: "herald_receipts_total", dimensions: [("app", appID), ("event", "any"), ("result", result)]).increment(by: Int64(count))
        }
        guard !applied.isEmpty else { return }
        let now = self.clock.nowMilliseconds
        let hooks = await self.webhooks(now: now)
        guard self.hasSubscribers(appID: appID) || hooks[appID]?.isEmpty == false else { return }
        let events = applied.map { receipt in
            let type: DeliveryEventType = receipt.event == .received ? .received : .opened
            let id = "\(receipt.deliveryID)-\(receipt.event == .received ? "r" : "o")"
            var members: [(String, JSONValue)] = [
                ("id", .string(id)), ("type", .string(type.rawValue)), ("at", .int(receipt.at)), ("appId", .string(appID)),
                ("notificationId", .string(receipt.notificationID)), ("deliveryId", .int(receipt.deliveryID)), ("token", .string(receipt.token)),
            ]
            if receipt.event == .opened { members.append(("action", receipt.action.map(JSONValue.string) ?? .null)) }
            return DeliveryEvent(id: id, type: type, appID: appID, json: .object(members))
        }
        self.publish(events)
        await self.enqueueWebhooks(events, hooks: hooks, now: now)
    }
}
