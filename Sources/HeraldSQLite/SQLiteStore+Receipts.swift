// SPDX-License-Identifier: Apache-2.0
package import HeraldCore

extension SQLiteStore {
    /// One transaction: each report reads its delivery (of this app only), ``ReceiptPolicy``
    /// decides, the delivery is updated; then each notification's counts once.
    package func recordReceipts(appID: String, _ reports: [ReceiptReport], now: Int64) async throws -> ReceiptOutcomes {
        guard !reports.isEmpty else { return ReceiptOutcomes() }
        return try await self.database.write { db in
            var outcomes = ReceiptOutcomes()
            var changes: [(notificationID: String, change: ReceiptPolicy.Change)] = []
            for report in reports {
                let rows = try db.query(
                    """
                    SELECT x.notification_id, x.token, x.received_at, x.opened_at FROM deliveries x
                    JOIN notifications n ON n.id = x.notification_id WHERE x.id = ? AND n.app_id = ?
                    """,
                    [.integer(report.deliveryID), .text(appID)]
                )
                guard let row = rows.first, let notificationID = row[0].string else {
                    outcomes.unknown.append(report.index)
                    continue
                }
                guard let change = ReceiptPolicy.change(report, receivedAt: row[2].int, openedAt: row[3].int) else {
                    outcomes.duplicates.append(report.index)
                    continue
                }
                if let at = change.receivedAt {
                    try db.query("UPDATE deliveries SET received_at = ? WHERE id = ?", [.integer(at), .integer(report.deliveryID)])
                }
                if let at = change.openedAt {
                    try db.query(
                        "UPDATE deliveries SET opened_at = ?, action = ? WHERE id = ?",
                        [.integer(at), change.action.map(SQLValue.text) ?? .null, .integer(report.deliveryID)])
                }
                changes.append((notificationID, change))
                outcomes.applied.append(AppliedReceipt(report, notificationID: notificationID, token: row[1].string ?? ""))
            }
            for (id, counts) in ReceiptPolicy.tally(changes) {
                try db.query(
                    "UPDATE notifications SET received_count = received_count + ?, opened_count = opened_count + ? WHERE id = ?",
                    [.integer(Int64(counts.received)), .integer(Int64(counts.opened)), .text(id)])
            }
            return outcomes
        }
    }

    package func receiptCounts(appID: String, notificationID: String) async throws -> ReceiptCounts? {
        try await self.database.read { db in
            try db.query("SELECT received_count, opened_count FROM notifications WHERE id = ? AND app_id = ?", [.text(notificationID), .text(appID)])
                .first.map { ReceiptCounts(received: Int($0[0].int ?? 0), opened: Int($0[1].int ?? 0)) }
        }
    }
}
