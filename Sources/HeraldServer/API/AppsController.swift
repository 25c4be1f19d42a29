// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI
import HeraldCore
import Hummingbird

/// `/v1/apps` and each app's APNs credentials (admin keys).
struct AppsController {
    let store: any HeraldStore
    let secrets: SecretBox
    let clock: any EpochClock

    func addRoutes(to v1: RouterGroup<APIRequestContext>) {
        let admin = v1.group("apps").add(middleware: RequireScope(.admin, store: self.store))
        admin.post(use: self.create)
        admin.get(use: self.list)
        admin.put(":app/credentials/:environment", use: self.setCredentials)
    }

    @Sendable func create(_ request: Request, context: APIRequestContext) async throws -> Answer<AppResponse> {
        let body = try await request.decode(as: CreateAppRequest.self, context: context)
        let id = try Validate.string(body.id, "id", pattern: .identifier)
        let bundleID = try Validate.string(body.bundleId, "bundleId", pattern: .bundleID)
        let app = App(id: id, bundleID: bundleID, createdAt: self.clock.nowMilliseconds)
        try await self.store.createApp(app)
        return Answer(.created, AppResponse(app))
    }

    @Sendable func list(_ request: Request, context: APIRequestContext) async throws -> AppList {
        AppList(apps: try await self.store.apps().map(AppResponse.init))
    }

    @Sendable func setCredentials(_ request: Request, context: APIRequestContext) async throws -> Response {
        let app = try context.requireApp()
        guard let environment = context.parameters.get("environment").flatMap(APNSEnvironment.init(name:)) else {
            throw HeraldError.invalid("the environment must be development (sandbox) or production", code: "bad_environment")
        }
        let material = try Self.credential(try await request.decode(as: CredentialRequest.self, context: context))
        let sealed: [UInt8]
        do {
            sealed = try self.secrets.seal(CredentialCoding.encode(material))
        } catch {
            throw HeraldError(code: "seal_failed", "cannot encrypt the credentials")
        }
        try await self.store.setCredential(appID: app.id, environment: environment, sealed: sealed, now: self.clock.nowMilliseconds)
        return Response(status: .noContent)
    }

    static func credential(_ body: CredentialRequest) throws -> CredentialMaterial {
        if let pem = body.privateKey, let keyID = body.keyId, let teamID = body.teamId {
            do {
                _ = try SigningKey(pem: pem, keyID: keyID, teamID: teamID)
            } catch {
                throw HeraldError.unprocessable(error.description, code: "bad_key")
            }
            var restriction: APNSEnvironment?
            if let name = body.restrictedTo {
                guard let environment = APNSEnvironment(name: name) else {
                    throw HeraldError.invalid("restrictedTo must be development or production", code: "bad_environment")
                }
                restriction = environment
            }
            return .token(keyID: keyID, teamID: teamID, privateKeyPEM: pem, restrictedTo: restriction)
        }
        if let certificate = body.certificate, let key = body.privateKey {
            guard certificate.contains("BEGIN CERTIFICATE"), key.contains("PRIVATE KEY") else {
                throw HeraldError.unprocessable("certificate and privateKey must be PEM", code: "bad_certificate")
            }
            return .certificate(certificatePEM: certificate, privateKeyPEM: key)
        }
        throw HeraldError.invalid("give keyId, teamId and privateKey (a .p8 key), or certificate and privateKey (PEM)", code: "bad_credentials")
    }
}
