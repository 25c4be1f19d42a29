// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import Foundation
import HeraldAPI
import HeraldCore
import Hummingbird

/// Setting an app up in the browser: create, edit and delete it; upload an environment's
/// credentials (a `.p8` signing key, or a PEM certificate and key) and check them against APNs
/// without notifying anyone. Every form is an admin session's, with its CSRF token; key material
/// is never shown, logged or echoed in an error.
struct DashboardSetupController: Sendable {
    let dashboard: Dashboard

    /// A token no device holds (all zeros): APNs answers 400 `BadDeviceToken` to working
    /// credentials and 403 to bad ones, and notifies nobody either way.
    static let probeToken = String(repeating: "0", count: 64)

    var apps: DashboardAppsController { DashboardAppsController(dashboard: self.dashboard) }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.post("apps") { request, _ in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let id = (form["id"] ?? "").trimmingCharacters(in: .whitespaces)
            let bundleID = (form["bundleId"] ?? "").trimmingCharacters(in: .whitespaces)
            do {
                let app = try await self.dashboard.backend.createApp(id: id, bundleID: bundleID)
                return DashboardViews.redirect("/dashboard/apps/\(DashboardFormat.path(app.id))")
            } catch let error as HeraldError {
                let view = try await self.apps.appsPage(
                    error: DashboardFormat.sentence(error.message), form: .init(id: id, bundleID: bundleID))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("apps/:app/settings") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            let tags = (form["protectedTags"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            do {
                try await self.dashboard.backend.updateApp(
                    app, userVerification: form["userVerification"] != nil, protectedTags: tags,
                    quietHours: (form["quietStart"] ?? "", form["quietEnd"] ?? ""),
                    frequencyCap: (form["capLimit"] ?? "", form["capWindow"] ?? "", form["capPerCategory"] != nil),
                    throttlePerMinute: form["throttlePerMinute"] ?? "", unboundAssertions: form["unboundAssertions"] != nil,
                    rateLimits: Dictionary(uniqueKeysWithValues: AppRateLimits.fields.map { ($0, form["rateLimit." + $0] ?? "") }))
            } catch let error as HeraldError {
                let view = try await self.apps.appPage(app: app, secret: nil, setupError: DashboardFormat.sentence(error.message))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
            let view = try await self.apps.appPage(app: try await self.dashboard.app(app.id), secret: nil, notice: "Settings saved.")
            return self.dashboard.views.response(view, session: session)
        }
        group.post("apps/:app/delete") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            guard (form["confirm"] ?? "").trimmingCharacters(in: .whitespaces) == app.id else {
                let view = try await self.apps.appPage(
                    app: app, secret: nil,
                    setupError: "Type the app's id (\(app.id)) to confirm: deleting it removes its devices, notifications and keys.")
                return self.dashboard.views.response(view, session: session, status: .badRequest)
            }
            try await self.dashboard.backend.deleteApp(app, by: session.key.id)
            return DashboardViews.redirect("/dashboard/apps")
        }
        group.post("apps/:app/credentials") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            do {
                let environment = try Self.environment(form["environment"])
                try await self.dashboard.backend.setCredential(app, environment: environment, try Self.credentialRequest(form))
                let view = try await self.apps.appPage(
                    app: app, secret: nil, notice: "\(DashboardFormat.environmentName(environment).capitalized) credentials saved: check them below.")
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError {
                // The message names the field that is wrong, never the material.
                let view = try await self.apps.appPage(app: app, secret: nil, setupError: Self.credentialMessage(error))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("apps/:app/credentials/:environment/check") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            if context.parameters.get("environment") == "fcm" {
                // The FCM service account (``DashboardFCMController``).
                let check = await DashboardFCMController(dashboard: self.dashboard).check(app: app)
                let view = try await self.apps.appPage(app: app, secret: nil, fcm: .init(fcmCheck: check))
                return self.dashboard.views.response(view, session: session)
            }
            let environment = try Self.environment(context.parameters.get("environment"))
            let check = await self.check(app: app, environment: environment)
            let view = try await self.apps.appPage(app: app, secret: nil, check: check)
            return self.dashboard.views.response(view, session: session)
        }
    }

    static func environment(_ name: String?) throws -> APNSEnvironment {
        switch name {
        case "development", "sandbox": return .development
        case "production": return .production
        default: throw HeraldError.invalid("choose sandbox (development) or production", code: "bad_environment")
        }
    }

    /// The API's credential body from the form: a `.p8` key (a file or pasted), a certificate
    /// and its key in PEM form, or a `.p12` and its passphrase.
    static func credentialRequest(_ form: [String: String]) throws -> CredentialRequest {
        func field(_ names: String...) -> String? { names.lazy.compactMap { DashboardForm.field(form, $0) }.first }
        if form["kind"] == "pkcs12" {
            guard let bundle = field("pkcs12File") else {
                throw HeraldError.invalid("choose the .p12 file", code: "missing_pkcs12")
            }
            // A passphrase is taken as typed (spaces are part of it).
            return CredentialRequest(pkcs12: bundle, passphrase: form["pkcs12Passphrase"].flatMap { $0.isEmpty ? nil : $0 })
        }
        if form["kind"] == "certificate" {
            guard let certificate = field("certificateFile", "certificate") else {
                throw HeraldError.invalid("choose the certificate's PEM file (or paste it)", code: "missing_certificate")
            }
            // A PEM file holding both the certificate and its key serves for both.
            guard let key = field("certificateKeyFile", "certificateKey") ?? (certificate.contains("PRIVATE KEY") ? certificate : nil) else {
                throw HeraldError.invalid("choose the certificate's private key (PEM), or a PEM file with both", code: "missing_privateKey")
            }
            return CredentialRequest(privateKey: key, certificate: certificate)
        }
        guard let keyID = field("keyId"), let teamID = field("teamId") else {
            throw HeraldError.invalid("give the key id and the team id (10 characters each, from the developer account)", code: "missing_keyId")
        }
        guard let key = field("keyFile", "privateKey") else {
            throw HeraldError.invalid("choose the .p8 file (or paste its text)", code: "missing_privateKey")
        }
        return CredentialRequest(keyId: keyID, teamId: teamID, privateKey: key)
    }

    /// What went wrong with uploaded credentials, in words that never quote the material.
    static func credentialMessage(_ error: HeraldError) -> String {
        switch error.code {
        case "bad_key": return "That is not a usable .p8 signing key (a P-256 private key in PEM form, as Apple's .p8 file holds)."
        case "bad_certificate":
            return error.message.contains(".p12")
                ? DashboardFormat.sentence(error.message)
                : "The certificate and its key must both be PEM text (-----BEGIN CERTIFICATE----- and -----BEGIN PRIVATE KEY-----)."
        default: return DashboardFormat.sentence(error.message)
        }
    }

    /// Proves an environment's credentials: a background push, never stored, to a token nobody
    /// holds. 400 `BadDeviceToken` means APNs took the credentials; 403 means it refused them.
    func check(app: App, environment: APNSEnvironment) async -> DashboardAppsController.Check {
        let name = DashboardFormat.environmentName(environment)
        func result(_ working: Bool, _ message: String) -> DashboardAppsController.Check {
            DashboardAppsController.Check(environment: name, working: working, message: message)
        }
        let client: APNSClient
        do {
            client = try await self.dashboard.clients.client(appID: app.id, environment: environment)
        } catch {
            return result(false, DashboardFormat.sentence(error.message))
        }
        let request: APNSRequest
        do {
            request = APNSRequest(
                deviceToken: try DeviceToken(hex: Self.probeToken),
                headers: NotificationHeaders(pushType: .background, topic: app.bundleID, priority: .throttled, expiration: .immediately),
                payload: Array(#"{"aps":{"content-available":1}}"#.utf8)
            )
        } catch {
            return result(false, "The check could not be prepared.")
        }
        do {
            try await client.send(request)
            return result(true, "APNs accepted the credentials (and, unexpectedly, the test token).")
        } catch {
            let reason = error.reason?.rawValue ?? ""
            switch (error.status, reason) {
            case (400?, "BadDeviceToken"):
                return result(
                    true, "Working: APNs accepted the credentials and refused only the deliberately invalid device token (400 BadDeviceToken).")
            case (403?, _):
                return result(false, "Refused: APNs answered 403 \(reason). \(DashboardFormat.explain(reason))")
            case (let status?, _):
                return result(false, "APNs answered \(status) \(reason). \(DashboardFormat.explain(reason))")
            case (nil, _):
                return result(false, "APNs could not be reached: \(error.message)")
            }
        }
    }
}
