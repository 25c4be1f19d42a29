// SPDX-License-Identifier: Apache-2.0
package import APNSModels

/// A result row as both SQL drivers read it: by column number, nil for NULL.
package protocol StoredRow {
    func isNull(_ column: Int) -> Bool
    func int(_ column: Int) -> Int64?
    func string(_ column: Int) -> String?
    func bytes(_ column: Int) -> [UInt8]?
}

/// The SQL both drivers (SQLite and PostgreSQL) write the same way, and the records read back
/// from it.
package enum StoreSQL {
    /// `CASE` expressions giving each device's push type and topic from the kind table (enum
    /// values only, never caller input, go into the SQL text); `bundle` is the bundle id's
    /// placeholder (`?1`, `$1`).
    package static func pushTypeAndTopic(fixed: PushType?, bundle: String) -> (pushType: String, topic: String) {
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
    package static let summaryColumns =
        "id, app_id, created_at, scheduled_at, audience_size, expand_after, cancelled_at, payload, push_type, priority, collapse_id, expiration, targeting, placeholder"

    /// A delivery with its device's kind, from `deliveries x LEFT JOIN devices d`; read with
    /// ``DeliveryRecord/init(row:)``.
    package static let deliveryColumns = """
        x.id, x.notification_id, x.token, d.kind, x.environment, x.push_type, x.state, x.attempts, x.apns_id, x.status, x.reason,
        x.latency_ms, x.updated_at, x.unknown_outcomes, x.received_at, x.opened_at, x.action
        """
}

extension NotificationSummary {
    /// A row of ``StoreSQL/summaryColumns``.
    package init(row: some StoredRow) {
        self.init(
            id: row.string(0) ?? "", appID: row.string(1) ?? "", createdAt: row.int(2) ?? 0, scheduledAt: row.int(3) ?? 0,
            audienceSize: Int(row.int(4) ?? 0), expanding: !row.isNull(5), cancelledAt: row.int(6)
        )
        // What was sent, for the history; an end-to-end encrypted notification's plaintext is not.
        self.content = NotificationContent(
            payload: row.isNull(13) ? row.bytes(7) : nil, encrypted: !row.isNull(13), pushType: row.string(8).flatMap(PushType.init(rawValue:)),
            priority: row.int(9), collapseID: row.string(10), expiration: row.int(11), targetingJSON: row.string(12)
        )
    }
}

extension DeliveryRecord {
    /// A row of ``StoreSQL/deliveryColumns``.
    package init(row: some StoredRow) {
        self.init(
            id: row.int(0) ?? 0, notificationID: row.string(1) ?? "", token: row.string(2) ?? "",
            kind: row.string(3).flatMap(DeviceKind.init(rawValue:)),
            route: row.string(4).flatMap(Route.init(stored:)) ?? .apns(.production),
            pushType: row.string(5).flatMap(PushType.init(rawValue:)) ?? .alert,
            state: row.string(6).flatMap(DeliveryState.init(rawValue:)) ?? .pending, attempts: Int(row.int(7) ?? 0),
            apnsID: row.string(8), status: row.int(9).map(Int.init), reason: row.string(10), latencyMilliseconds: row.int(11),
            updatedAt: row.int(12) ?? 0
        )
        self.unknownOutcomes = Int(row.int(13) ?? 0)
        self.receivedAt = row.int(14)
        self.openedAt = row.int(15)
        self.action = row.string(16)
    }
}

/// What every delivery of one notification shares, read once per claim.
package struct NotificationShared: Sendable {
    package var appID: String
    package var priority: Priority?
    package var expiration: Int64?
    package var collapseID: String?
    package var payload: [UInt8]
    package var placeholder: [UInt8]?
    package var onUnknownOutcome: UnknownOutcomeAction
    /// For a notification sent by template: what renders each device's payload.
    package var template: TemplateRendering?
    package var quietHours: QuietHours?
    package var frequencyCap: NotificationCap?
    package var throttlePerMinute: Int?
    /// What other platforms than APNs are sent (``NotificationParts``); empty for a notification
    /// to APNs alone.
    package var parts: [Transport: [UInt8]]

    /// Its columns in `notifications`, in the order ``init(row:from:)`` reads them.
    package static let columns =
        "app_id, priority, expiration, collapse_id, payload, placeholder, on_unknown_outcome, quiet_hours, frequency_cap, throttle_per_minute, template, parts"

    /// Reads ``columns`` from `row`, starting at column `first`.
    package init(row: some StoredRow, from first: Int) {
        self.appID = row.string(first) ?? ""
        self.priority = row.int(first + 1).flatMap { Priority(rawValue: Int($0)) }
        self.expiration = row.int(first + 2)
        self.collapseID = row.string(first + 3)
        self.payload = row.bytes(first + 4) ?? []
        self.placeholder = row.bytes(first + 5)
        self.onUnknownOutcome = row.string(first + 6).flatMap(UnknownOutcomeAction.init(rawValue:)) ?? .default
        self.quietHours = row.string(first + 7).flatMap(QuietHours.init)
        self.frequencyCap = row.string(first + 8).flatMap(NotificationCap.init)
        self.throttlePerMinute = row.int(first + 9).map { Int($0) }
        self.parts = row.bytes(first + 11).map(NotificationParts.read) ?? [:]
        self.template = row.string(first + 10).flatMap { TemplateRendering(stored: $0, payload: self.payload, parts: self.parts) }
    }
}

/// A device of an audience chunk: what its delivery is made of. Read from `d.id, d.token,
/// d.environment, <push type>, <topic>`.
package struct ChunkDevice: Sendable {
    package var id: Int64
    package var token: String
    package var environment: String
    package var pushType: String
    package var topic: String
    /// Its time zone and user, when read with it for its notification's policies (then
    /// ``PolicyDevice/columns`` follow the others).
    package var policy: PolicyDevice?

    package init(row: some StoredRow, from first: Int = 0, policy: Bool = false) {
        self.id = row.int(first) ?? 0
        self.token = row.string(first + 1) ?? ""
        self.environment = row.string(first + 2) ?? ""
        self.pushType = row.string(first + 3) ?? ""
        self.topic = row.string(first + 4) ?? ""
        if policy { self.policy = PolicyDevice(timeZone: row.string(first + 5), userID: row.string(first + 6)) }
    }
}

/// What delivery policies read of a device: its time zone (quiet hours) and its user (frequency
/// caps). A chunk of a notification with either policy reads them with its devices, so that the
/// policies need not read those devices again.
package struct PolicyDevice: Sendable, Hashable {
    package var timeZone: String?
    package var userID: String?

    package init(timeZone: String?, userID: String?) {
        self.timeZone = timeZone
        self.userID = userID
    }

    /// Read after a chunk device's columns (over `devices d`).
    package static let columns = ", d.time_zone, d.user_id"

    /// Whether a notification's policies read its devices' time zone or user.
    package static func wanted(by shared: NotificationShared) -> Bool {
        shared.quietHours != nil || shared.frequencyCap != nil
    }
}

extension ClaimedDelivery {
    /// A claimed row: id, notification_id, device_id, token, environment, push_type, topic, attempts,
    /// unknown_outcomes, reason.
    package init(row: some StoredRow, shared: NotificationShared, notificationID: String) {
        self.init(
            id: row.int(0) ?? 0, notificationID: notificationID, appID: shared.appID, deviceID: row.int(2) ?? 0,
            token: row.string(3) ?? "", route: row.string(4).flatMap(Route.init(stored:)) ?? .apns(.production),
            pushType: row.string(5).flatMap(PushType.init(rawValue:)) ?? .alert, topic: row.string(6) ?? "",
            priority: shared.priority, expiration: shared.expiration, collapseID: shared.collapseID, payload: shared.payload,
            attempts: Int(row.int(7) ?? 0), placeholder: shared.placeholder
        )
        self.takePart(of: shared)
        self.unknownOutcomes = Int(row.int(8) ?? 0)
        self.throttleSlotted = row.string(9) == Throttle.reason
        self.onUnknownOutcome = shared.onUnknownOutcome
        self.template = shared.template
        self.quietHours = shared.quietHours
        self.frequencyCap = shared.frequencyCap
        self.throttlePerMinute = shared.throttlePerMinute
    }

    /// `device`'s delivery `id` of chunk `chunk` (its attempt `attempts`).
    package init(id: Int64, device: ChunkDevice, notificationID: String, shared: NotificationShared, attempts: Int, chunk: Int64) {
        self.init(
            id: id, notificationID: notificationID, appID: shared.appID, deviceID: device.id, token: device.token,
            route: Route(stored: device.environment) ?? .apns(.production), pushType: PushType(rawValue: device.pushType) ?? .alert,
            topic: device.topic, priority: shared.priority, expiration: shared.expiration, collapseID: shared.collapseID, payload: shared.payload,
            attempts: attempts, placeholder: shared.placeholder, chunk: chunk
        )
        self.takePart(of: shared)
        self.onUnknownOutcome = shared.onUnknownOutcome
        self.template = shared.template
        self.quietHours = shared.quietHours
        self.frequencyCap = shared.frequencyCap
        self.throttlePerMinute = shared.throttlePerMinute
    }

    /// A delivery to another platform than APNs carries its notification's part for that
    /// platform (the APNs payload is the notification's `payload` itself).
    private mutating func takePart(of shared: NotificationShared) {
        let transport = self.route.transport
        guard transport != .apns else { return }
        self.payload = shared.parts[transport] ?? []
    }
}
