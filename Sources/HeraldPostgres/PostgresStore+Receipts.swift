// SPDX-License-Identifier: Apache-2.0
package import HeraldCore
import PostgresNIO

extension PostgresStore {
    /// One transaction: the batch's deliveries (of this app only) read and locked in one query,
    /// ``ReceiptPolicy`` decides in order, then the changed deliveries and each notification's
    /// counts are written.
    package func recordReceipts(appID: String, _ reports: [ReceiptReport], now: Int64) async throws -> ReceiptOutcomes {
        guard !reports.isEmpty else { return ReceiptOutcomes() }
        return try await self.write { db in
            let rows = try await db.query(
                """
                SELECT x.id, x.notification_id, x.token, x.received_at, x.opened_at FROM deliveries x
                JOIN notifications n ON n.id = x.notification_id WHERE x.id = ANY($1) AND n.app_id = $2
                ORDER BY x.id FOR UPDATE OF x
                """,
                [.ints(Array(Set(reports.map(\.deliveryID)))), .text(appID)]
            )
            var held: [Int64: (notificationID: String, token: String, receivedAt: Int64?, openedAt: Int64?)] = [:]
            for row in rows {
                guard let id = row.int(0) else { continue }
                held[id] = (row.string(1) ?? "", row.string(2) ?? "", row.int(3), row.int(4))
            }
            var outcomes = ReceiptOutcomes()
            var changes: [(notificationID: String, change: ReceiptPolicy.Change)] = []
            for report in reports {
                guard var delivery = held[report.deliveryID] else {
                    outcomes.unknown.append(report.index)
                    continue
                }
                guard let change = ReceiptPolicy.change(report, receivedAt: delivery.receivedAt, openedAt: delivery.openedAt) else {
                    outcomes.duplicates.append(report.index)
                    continue
                }
                if let at = change.receivedAt {
                    delivery.receivedAt = at
                    try await db.query("UPDATE deliveries SET received_at = $1 WHERE id = $2", [.int(at), .int(report.deliveryID)])
                }
                if let at = change.openedAt {
                    delivery.openedAt = at
                    try await db.query(
                        "UPDATE deliveries SET opened_at = $1, action = $2 WHERE id = $3", [.int(at), .text(change.action), .int(report.deliveryID)])
                }
                held[report.deliveryID] = delivery
                changes.append((delivery.notificationID, change))
                outcomes.applied.append(AppliedReceipt(report, notificationID: delivery.notificationID, token: delivery.token))
            }
            for (id, counts) in ReceiptPolicy.tally(changes).sorted(by: { $0.key < $1.key }) {
                try await db.query(
                    "UPDATE notifications SET received_count = received_count + $1, opened_count = opened_count + $2 WHERE id = $3",
                    [.int(Int64(counts.received)), .int(Int64(counts.opened)), .text(id)])
            }
            return outcomes
        }
    }

    package func receiptCounts(appID: String, notificationID: String) async throws -> ReceiptCounts? {
        try await self.read { db in
            try await db.query(
                "SELECT received_count, opened_count FROM notifications WHERE id = $1 AND app_id = $2", [.text(notificationID), .text(appID)]
            ).first.map { ReceiptCounts(received: Int($0.int(0) ?? 0), opened: Int($0.int(1) ?? 0)) }
        }
    }
}
