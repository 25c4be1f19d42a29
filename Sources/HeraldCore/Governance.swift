// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// One environment's stored credential, as kept: sealed, with when it was set.
package struct CredentialRecord: Sendable, Hashable {
    package var environment: Route
    package var sealed: [UInt8]
    package var updatedAt: Int64

    package init(environment: Route, sealed: [UInt8], updatedAt: Int64) {
        self.environment = environment
        self.sealed = sealed
        self.updatedAt = updatedAt
    }
}

/// Everything Herald holds about one user of an app: their devices (with tags and keys), the
/// deliveries to those devices, and the invalidations of those devices.
package struct UserData: Sendable, Hashable {
    package var devices: [Device]
    package var deliveries: [DeliveryRecord]
    package var invalidations: [Invalidation]

    package init(devices: [Device], deliveries: [DeliveryRecord], invalidations: [Invalidation]) {
        self.devices = devices
        self.deliveries = deliveries
        self.invalidations = invalidations
    }
}

/// What an erasure changed: devices removed, delivery records scrubbed (kept, without their
/// token, for the counts), notifications whose plaintext only this user was to receive emptied,
/// webhook messages scrubbed of the user's tokens.
package struct UserErasure: Sendable, Hashable {
    package var devices: Int
    package var deliveries: Int
    package var notifications: Int
    package var webhookMessages: Int

    package init(devices: Int = 0, deliveries: Int = 0, notifications: Int = 0, webhookMessages: Int = 0) {
        self.devices = devices
        self.deliveries = deliveries
        self.notifications = notifications
        self.webhookMessages = webhookMessages
    }
}

/// An audit record: who (the API key's id), what (the action), when (ms), about what (the app
/// and the subject, e.g. the user id).
package struct AuditRecord: Sendable, Hashable {
    package var id: Int64
    package var at: Int64
    package var keyID: String?
    package var action: String
    package var appID: String?
    package var subject: String?

    package init(id: Int64 = 0, at: Int64, keyID: String?, action: String, appID: String?, subject: String?) {
        self.id = id
        self.at = at
        self.keyID = keyID
        self.action = action
        self.appID = appID
        self.subject = subject
    }
}

/// Data governance: deleting a whole app in bounded chunks, credentials as metadata, a user's
/// data exported or erased, and the audit trail of those acts.
package protocol GovernanceStore: Sendable {
    /// The app's stored credentials with when each was set.
    func credentialRecords(appID: String) async throws -> [CredentialRecord]
    /// Removes one environment's credential; false when there was none.
    func deleteCredential(appID: String, environment: Route) async throws -> Bool

    /// One short transaction of an app's deletion: revokes the app's keys and removes its
    /// credentials, then deletes up to `limit` of its rows (deliveries, audience chunks,
    /// notifications, tags, invalidations, devices, webhook messages, in that order); once none
    /// is left, deletes the app itself (webhooks, keys bound to it). Returns the rows deleted:
    /// 0 when the app is gone.
    func deleteAppRows(appID: String, limit: Int, now: Int64) async throws -> Int
    /// Starts the app's deletion, in one transaction: marks it (``App/deletion``, kept if it was
    /// marked already), revokes its keys and removes its credentials, so nothing more is sent or
    /// registered for it. The app as it now is; nil when there is none.
    func beginAppDeletion(appID: String, now: Int64) async throws -> App?
    /// The apps whose deletion began and is not done (after a restart, the work left).
    func appsBeingDeleted() async throws -> [String]

    /// The user's devices (those bound to `userID` now).
    func userDevices(appID: String, userID: String) async throws -> [Device]
    /// Every delivery to these devices of the app, newest first.
    func deliveries(appID: String, deviceIDs: [Int64]) async throws -> [DeliveryRecord]
    /// Removes the user's devices (and tags, keys, invalidations), scrubs their tokens from
    /// delivery records and webhook messages (pending deliveries fail as `Erased`), empties the
    /// payload of notifications that only they were to receive, deletes the Live Activities
    /// started for users among whom they are, and writes `audit`, all in one transaction.
    func eraseUser(appID: String, userID: String, audit: AuditRecord) async throws -> UserErasure

    func addAudit(_ record: AuditRecord) async throws
    /// Newest first; of one app when given.
    func auditRecords(appID: String?, limit: Int) async throws -> [AuditRecord]
}

extension GovernanceStore {
    /// Deletes the app chunk by chunk (each its own short transaction); returns the rows deleted.
    @discardableResult
    package func deleteApp(id: String, chunkSize: Int = 2000, now: Int64) async throws -> Int {
        var total = 0
        while true {
            let deleted = try await self.deleteAppRows(appID: id, limit: chunkSize, now: now)
            if deleted == 0 { return total }
            total += deleted
        }
    }
}

extension HeraldStore {
    /// Everything held about the user: devices, their deliveries and invalidations.
    package func userData(appID: String, userID: String) async throws -> UserData {
        let devices = try await self.userDevices(appID: appID, userID: userID)
        var invalidations: [Invalidation] = []
        for device in devices { invalidations += try await self.invalidations(appID: appID, deviceID: device.id) }
        let deliveries = try await self.deliveries(appID: appID, deviceIDs: devices.map(\.id))
        return UserData(devices: devices, deliveries: deliveries, invalidations: invalidations)
    }
}

/// The SQL-free parts of governance.
package enum GovernancePolicy {
    /// Rows per transaction when an app is deleted: short enough for others' writes to interleave.
    package static let deletionChunk = 2000
    /// What a scrubbed delivery's reason becomes when it was still pending.
    package static let erasedReason = "Erased"
}
