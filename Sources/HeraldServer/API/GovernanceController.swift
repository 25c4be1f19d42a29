// SPDX-License-Identifier: Apache-2.0
import APNSModels
import FCMClient
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// Data governance (admin keys): a whole app deleted, its credentials listed as metadata and
/// deleted, a user's data exported or erased, and the audit trail of those acts.
struct GovernanceController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock
    let appDeletions: AppDeletions

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let admin = v1.group("apps").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock))
        admin.delete(":app", use: self.deleteApp)
        admin.get(":app/credentials", use: self.listCredentials)
        admin.delete(":app/credentials/:environment", use: self.deleteCredential)
        admin.get(":app/users/:userId", use: self.exportUser)
        admin.delete(":app/users/:userId", use: self.eraseUser)
        v1.group("audit").add(middleware: RequireScope(.admin, store: self.store, clock: self.clock)).get(use: self.audit)
    }

    /// Begins the app's deletion and answers 202 with the app and its deletion's progress: its
    /// keys are revoked and its credentials removed at once (nothing more is sent or registered
    /// for it), and ``AppDeletions`` deletes every row of it in the background, chunk by chunk,
    /// going on after a restart. `GET /v1/apps/{app}` shows the progress until the app is gone;
    /// asking again answers 202 again.
    @Sendable func deleteApp(_ request: Request, context: APIRequestContext) async throws -> Answer<AppResponse> {
        let app = try context.requireApp()
        let now = self.clock.nowMilliseconds
        if app.deletion == nil {
            try await self.store.addAudit(AuditRecord(at: now, keyID: context.key?.id, action: "app.delete", appID: app.id, subject: nil))
        }
        guard let deleting = try await self.store.beginAppDeletion(appID: app.id, now: now) else { throw HeraldError.notFound("app '\(app.id)'") }
        self.appDeletions.ring()
        return Answer(.accepted, AppResponse(deleting))
    }

    @Sendable func listCredentials(_ request: Request, context: APIRequestContext) async throws -> CredentialList {
        let app = try context.requireApp()
        let records = try await self.store.credentialRecords(appID: app.id)
        return CredentialList(credentials: records.map(self.info))
    }

    /// Metadata only: which kind, whose key, until when; never the material.
    func info(_ record: CredentialRecord) -> CredentialInfo {
        let environment = record.environment.apiName
        if record.environment == .webpush {
            // The public key is public: the key id browsers know it by.
            guard let publicKey = VAPIDKeys.publicKey(record.sealed, secrets: self.secrets) else {
                return CredentialInfo(environment: environment, kind: "unreadable", updatedAt: record.updatedAt)
            }
            return CredentialInfo(environment: environment, kind: "vapid", keyId: publicKey, updatedAt: record.updatedAt)
        }
        if record.environment == .fcm {
            guard let key = try? FCMClientProvider.open(record.sealed, secrets: self.secrets) else {
                return CredentialInfo(environment: environment, kind: "unreadable", updatedAt: record.updatedAt)
            }
            return CredentialInfo(
                environment: environment, kind: "serviceAccount", keyId: key.privateKeyID, projectId: key.projectID,
                clientEmail: key.clientEmail, updatedAt: record.updatedAt)
        }
        guard let opened = try? self.secrets.open(record.sealed), let material = try? CredentialCoding.decode(opened) else {
            return CredentialInfo(environment: environment, kind: "unreadable", updatedAt: record.updatedAt)
        }
        switch material {
        case .token(let keyID, let teamID, _, let restriction):
            return CredentialInfo(
                environment: environment, kind: "token", keyId: keyID, teamId: teamID, restrictedTo: restriction?.apiName, updatedAt: record.updatedAt
            )
        case .certificate(let pem, _):
            let summary = CertificateSummary(pem: pem)
            return CredentialInfo(
                environment: environment, kind: "certificate", certificateSubject: summary?.subject,
                certificateExpiresAt: summary?.expiresAtMilliseconds, updatedAt: record.updatedAt
            )
        }
    }

    @Sendable func deleteCredential(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        let environment = try AppsController.credentialRoute(context)
        guard try await self.store.deleteCredential(appID: app.id, environment: environment) else {
            throw HeraldError.notFound("\(environment.apiName) credentials of app '\(app.id)'")
        }
        try await self.store.addAudit(
            AuditRecord(
                at: self.clock.nowMilliseconds, keyID: context.key?.id, action: "credentials.delete", appID: app.id, subject: environment.apiName)
        )
        return Response(status: .noContent)
    }

    /// Everything Herald holds about the user (GDPR access, CCPA know); audited.
    @Sendable func exportUser(_ request: Request, context: APIRequestContext) async throws -> UserDataResponse {
        let app = try context.requireApp()
        let user = try Self.userID(context)
        try await self.store.addAudit(
            AuditRecord(at: self.clock.nowMilliseconds, keyID: context.key?.id, action: "user.export", appID: app.id, subject: user))
        let data = try await self.store.userData(appID: app.id, userID: user)
        return UserDataResponse(
            userId: user,
            devices: data.devices.map { device in DeviceResponse(device, invalidations: data.invalidations.filter { $0.deviceID == device.id }) },
            deliveries: data.deliveries.map { DeliveryResponse($0, withNotification: true) }
        )
    }

    /// Erases the user (GDPR erasure, CCPA delete): their devices go, their tokens leave the
    /// delivery records (kept for the counts) and webhook messages, and a notification only
    /// they were to receive loses its payload; audited in the same transaction.
    @Sendable func eraseUser(_ request: Request, context: APIRequestContext) async throws -> UserErasureResponse {
        let app = try context.requireApp()
        let user = try Self.userID(context)
        let audit = AuditRecord(at: self.clock.nowMilliseconds, keyID: context.key?.id, action: "user.erase", appID: app.id, subject: user)
        let erased = try await self.store.eraseUser(appID: app.id, userID: user, audit: audit)
        return UserErasureResponse(
            userId: user, devices: erased.devices, deliveries: erased.deliveries, notifications: erased.notifications,
            webhookMessages: erased.webhookMessages
        )
    }

    @Sendable func audit(_ request: Request, context: APIRequestContext) async throws -> AuditList {
        let appID = request.uri.queryParameters.get("app")
        let limit = request.uri.queryParameters.get("limit").flatMap(Int.init) ?? 100
        guard (1...1000).contains(limit) else { throw HeraldError.invalid("limit is 1 to 1000", code: "bad_limit") }
        let records = try await self.store.auditRecords(appID: appID, limit: limit)
        return AuditList(
            records: records.map {
                AuditRecordResponse(id: $0.id, at: $0.at, keyId: $0.keyID, action: $0.action, appId: $0.appID, subject: $0.subject)
            })
    }

    static func userID(_ context: APIRequestContext) throws -> String {
        // The path's segment as sent: a user id may hold any character, percent-encoded ("/" as %2F).
        guard let user = context.parameters.get("userId")?.removingPercentEncoding, !user.isEmpty, user.utf8.count <= 256 else {
            throw HeraldError.invalid("the user id is 1 to 256 bytes", code: "bad_userId")
        }
        return user
    }
}

extension CredentialInfo: OmitsNilFields {
    static let fieldsOmittedWhenNil: Set<String> = ["keyId", "teamId", "restrictedTo", "certificateSubject", "certificateExpiresAt"]
}
extension AuditRecordResponse: OmitsNilFields {
    static let fieldsOmittedWhenNil: Set<String> = ["keyId", "appId", "subject"]
}
