// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore

// The API's answers, made from Herald's records. Written once: the server encodes these types,
// HeraldKit and the tests decode them.

extension AppResponse {
    init(_ app: App) {
        self.init(
            id: app.id, bundleId: app.bundleID, createdAt: app.createdAt, userVerification: app.security.userVerification,
            protectedTags: app.security.protectedTags, userSecretSet: app.security.sealedUserSecret != nil,
            receipts: app.security.receipts,
            quietHours: app.security.quietHours.map { QuietHoursSetting(start: $0.startText, end: $0.endText) },
            frequencyCap: app.security.frequencyCap.map {
                FrequencyCapSetting(limit: $0.limit, windowSeconds: $0.windowSeconds, perCategory: $0.perCategory)
            },
            throttlePerMinute: app.security.throttlePerMinute, unboundAssertions: app.security.unboundAssertions,
            rateLimits: app.security.rateLimits.isEmpty
                ? nil
                : AppRateLimitsSetting(
                    register: app.security.rateLimits.register?.description,
                    registerPerAddress: app.security.rateLimits.registerPerAddress?.description,
                    receipt: app.security.rateLimits.receipt?.description, send: app.security.rateLimits.send?.description),
            deletion: app.deletion.map { AppDeletionStatus(since: $0.since, deletedRows: $0.deletedRows) }
        )
    }
}

extension APIKeyResponse {
    init(_ key: StoredAPIKey) {
        self.init(
            id: key.id, scope: key.scope.rawValue, appId: key.appID, name: key.name, createdAt: key.createdAt, revokedAt: key.revokedAt,
            expiresAt: key.expiresAt, lastUsedAt: key.lastUsedAt
        )
    }
}

extension APNSEnvironment {
    /// The API's name: `sandbox` or `production`.
    var apiName: String { self == .development ? "sandbox" : "production" }
}

extension Route {
    /// The API's name: `sandbox` or `production` (APNs), `fcm`.
    var apiName: String { self.apnsEnvironment?.apiName ?? self.stored }
}

extension DeviceResponse: OmitsNilFields {
    static let fieldsOmittedWhenNil: Set<String> = ["invalidations", "endpoint"]

    init(_ device: Device, invalidations: [HeraldCore.Invalidation]? = nil) {
        let r = device.registration
        // A Web Push subscription's keys and endpoint are not shown: the endpoint masked, alone.
        let subscription = r.publicKey.flatMap { key in r.publicKeyType.flatMap { WebSubscription(DevicePublicKey(type: $0, key: key)) } }
        self.init(
            token: r.token, kind: r.kind.rawValue, environment: r.route.apiName, userId: r.userID, tags: r.tags, locale: r.locale,
            timeZone: r.timeZone, appVersion: r.appVersion, platform: r.platform, activityId: r.activityID, attributesType: r.attributesType,
            active: device.active, createdAt: device.createdAt, lastRegisteredAt: device.lastRegisteredAt, invalidatedAt: device.invalidatedAt,
            invalidationReason: device.invalidationReason, publicKeyType: r.publicKeyType,
            publicKey: subscription == nil ? r.publicKey.map { Data($0).base64EncodedString() } : nil,
            invalidations: invalidations?.map { .init(reason: $0.reason, apnsTimestamp: $0.apnsTimestamp, at: $0.at, applied: $0.applied) },
            transport: r.route.transport.rawValue, endpoint: subscription?.maskedEndpoint
        )
    }
}

extension DeliveryResponse: OmitsNilFields {
    static let fieldsOmittedWhenNil: Set<String> = ["notificationId", "receivedAt", "openedAt", "action"]

    init(_ d: DeliveryRecord, withNotification: Bool) {
        self.init(
            notificationId: withNotification ? d.notificationID : nil, token: d.token, kind: d.kind?.rawValue, environment: d.route.apiName,
            pushType: d.pushType.rawValue, state: QuietHours.apiState(d.state, reason: d.reason), attempts: d.attempts, apnsId: d.apnsID,
            status: d.status, reason: d.reason,
            latencyMs: d.latencyMilliseconds, updatedAt: d.updatedAt, outcomeUncertain: d.unknownOutcomes > 0, receivedAt: d.receivedAt,
            openedAt: d.openedAt, action: d.action, transport: d.route.transport.rawValue
        )
    }
}

extension NotificationSummaryResponse {
    init(_ summary: NotificationSummary) {
        self.init(
            id: summary.id, createdAt: summary.createdAt, scheduledAt: summary.scheduledAt, audience: summary.audienceSize,
            expanding: summary.expanding, cancelledAt: summary.cancelledAt
        )
    }
}

extension NotificationDetail {
    init(_ status: NotificationStatus, receipts: ReceiptCounts? = nil) {
        self.init(
            summary: NotificationSummaryResponse(status.summary),
            counts: DeliveryCounts(pending: status.counts[.pending] ?? 0, sent: status.counts[.sent] ?? 0, failed: status.counts[.failed] ?? 0),
            deliveries: status.deliveries.map { DeliveryResponse($0, withNotification: false) },
            funnel: NotificationFunnel(sent: status.counts[.sent] ?? 0, received: receipts?.received ?? 0, opened: receipts?.opened ?? 0)
        )
    }
}

extension WebhookResponse: OmitsNilFields {
    static let fieldsOmittedWhenNil: Set<String> = ["secret"]

    init(_ webhook: Webhook, secret: String? = nil) {
        self.init(
            id: webhook.id, url: webhook.url, events: DeliveryEventType.allCases.filter(webhook.types.contains).map(\.rawValue),
            createdAt: webhook.createdAt, secret: secret
        )
    }
}

extension WebhookMessageResponse {
    init(_ message: WebhookMessageRecord) {
        self.init(
            id: message.id, events: message.events, state: message.state.rawValue, attempts: message.attempts, createdAt: message.createdAt,
            expiresAt: message.expiresAt, nextAttemptAt: message.nextAttemptAt, deliveredAt: message.deliveredAt, lastStatus: message.lastStatus,
            lastError: message.lastError
        )
    }
}
