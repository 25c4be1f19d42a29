// SPDX-License-Identifier: Apache-2.0
public import APNSModels

/// A result row as both SQL drivers read it: by column number, nil for NULL.
public protocol StoredRow {
    func isNull(_ column: Int) -> Bool
    func int(_ column: Int) -> Int64?
    func string(_ column: Int) -> String?
    func bytes(_ column: Int) -> [UInt8]?
}

/// The SQL both drivers (SQLite and PostgreSQL) write the same way, and the records read back
/// from it.
public enum StoreSQL {
    /// `CASE` expressions giving each device's push type and topic from the kind table (enum
    /// values only, never caller input, go into the SQL text); `bundle` is the bundle id's
    /// placeholder (`?1`, `$1`).
    public static func pushTypeAndTopic(fixed: PushType?, bundle: String) -> (pushType: String, topic: String) {
        var pushTypeCases = "CASE d.kind"
        var topicCases = "CASE d.kind"
        for kind in DeviceKind.allCases {
            let pushType = fixed ?? kind.defaultPushType
            pushTypeCases += " WHEN '\(kind.rawValue)' THEN '\(pushType.rawValue)'"
            topicCases += " WHEN '\(kind.rawValue)' THEN \(bundle) || '\(pushType.topicSuffix ?? "")'"
        }
        return (pushTypeCases + " END", topicCases + " END")
    }

    /// A notification's summary, from `notifications`; read with ``NotificationSummary/init(row:)``.
    public static let summaryColumns = "id, app_id, created_at, scheduled_at, audience_size, expand_after, cancelled_at"

    /// A delivery with its device's kind, from `deliveries x LEFT JOIN devices d`; read with
    /// ``DeliveryRecord/init(row:)``.
    public static let deliveryColumns = """
        x.id, x.notification_id, x.token, d.kind, x.environment, x.push_type, x.state, x.attempts, x.apns_id, x.status, x.reason,
        x.latency_ms, x.updated_at
        """
}

extension NotificationSummary {
    /// A row of ``StoreSQL/summaryColumns``.
    public init(row: some StoredRow) {
        self.init(
            id: row.string(0) ?? "", appID: row.string(1) ?? "", createdAt: row.int(2) ?? 0, scheduledAt: row.int(3) ?? 0,
            audienceSize: Int(row.int(4) ?? 0), expanding: !row.isNull(5), cancelledAt: row.int(6)
        )
    }
}

extension DeliveryRecord {
    /// A row of ``StoreSQL/deliveryColumns``.
    public init(row: some StoredRow) {
        self.init(
            id: row.int(0) ?? 0, notificationID: row.string(1) ?? "", token: row.string(2) ?? "", kind: row.string(3).flatMap(DeviceKind.init(rawValue:)),
            environment: row.string(4).flatMap(APNSEnvironment.init(rawValue:)) ?? .production,
            pushType: row.string(5).flatMap(PushType.init(rawValue:)) ?? .alert,
            state: row.string(6).flatMap(DeliveryState.init(rawValue:)) ?? .pending, attempts: Int(row.int(7) ?? 0),
            apnsID: row.string(8), status: row.int(9).map(Int.init), reason: row.string(10), latencyMilliseconds: row.int(11),
            updatedAt: row.int(12) ?? 0
        )
    }
}
