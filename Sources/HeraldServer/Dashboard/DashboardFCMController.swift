// SPDX-License-Identifier: Apache-2.0
import FCMClient
import Foundation
import HeraldCore
import Hummingbird

/// An app's FCM (Android) credential in the browser: the Firebase service account's key file
/// uploaded (checked as `PUT /v1/apps/{app}/credentials/fcm` checks it), shown by its project,
/// email and key id (never the key), deleted, and checked against FCM without notifying anyone
/// (``DashboardFCMCheck``). Every form is an admin session's, with its CSRF token.
struct DashboardFCMController: Sendable {
    let dashboard: Dashboard

    var apps: DashboardAppsController { DashboardAppsController(dashboard: self.dashboard) }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        // `:environment` as the check's route names it (`…/credentials/:environment/check`):
        // only `fcm` has these forms.
        group.post("apps/:app/credentials/:environment") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            try Self.requireFCM(context.parameters.get("environment"))
            do {
                let text = DashboardForm.field(form, "serviceAccountFile") ?? DashboardForm.field(form, "serviceAccount")
                try await self.dashboard.backend.setFCMCredential(app, json: text)
                let view = try await self.apps.appPage(app: app, secret: nil, fcm: .init(fcmNotice: "FCM service account saved: check it below."))
                return self.dashboard.views.response(view, session: session)
            } catch let error as HeraldError {
                // With its code; the message names what is wrong, never the key.
                let view = try await self.apps.appPage(
                    app: app, secret: nil, fcm: .init(fcmError: "\(error.code): \(DashboardFormat.sentence(error.message))"))
                return self.dashboard.views.response(view, session: session, status: DashboardBackend.status(of: error))
            }
        }
        group.post("apps/:app/credentials/:environment/delete") { request, context in
            let form = try await DashboardForm.read(request)
            let session = try await self.dashboard.sessions.authorized(request, form: form)
            let app = try await self.dashboard.app(context.parameters.get("app"))
            try Self.requireFCM(context.parameters.get("environment"))
            let deleted = try await self.dashboard.backend.deleteCredential(app, route: .fcm, by: session.key.id)
            let notice = deleted ? "FCM service account deleted." : "The app had no FCM service account."
            let view = try await self.apps.appPage(app: app, secret: nil, fcm: .init(fcmNotice: notice))
            return self.dashboard.views.response(view, session: session)
        }
    }

    static func requireFCM(_ name: String?) throws {
        guard name == "fcm" else { throw HeraldError.invalid("only the FCM credential is uploaded here", code: "bad_environment") }
    }

    /// What the app's FCM credential is, for its page and the apps list.
    func credential(_ app: App, sealed: [UInt8]?) -> DashboardAppsController.FCMCredential {
        guard let sealed else {
            return self.dashboard.fcmEmulator == nil ? .init(notConfigured: true) : .init(builtInEmulator: true)
        }
        switch self.dashboard.backend.openFCMCredential(sealed) {
        case .success(let key):
            return .init(account: .init(projectID: key.projectID, clientEmail: key.clientEmail, keyID: key.privateKeyID ?? "—"))
        case .failure(let error):
            return .init(unreadable: DashboardFormat.sentence(error.message))
        }
    }

    /// Checks the app's FCM credential — its own service account's, or the built-in emulator's
    /// for an app without one — with a fresh access token and a validate-only message.
    func check(app: App) async -> DashboardFCMCheck.Outcome {
        guard let provider = self.dashboard.fcmClients else {
            return DashboardFCMCheck.Outcome(working: false, verdict: "not checked", message: "This server sends nothing to FCM.")
        }
        let own = (try? await self.dashboard.store.credentials(appID: app.id)[.fcm]) != nil
        let client: FCMClient
        do {
            client = try await provider.client(appID: app.id)
        } catch {
            let notConfigured = error.code == "no_credentials"
            return DashboardFCMCheck.Outcome(
                working: false, verdict: notConfigured ? "not configured" : "the key is bad",
                message: notConfigured
                    ? "The app has no FCM service account: upload its key file (JSON) below." : DashboardFormat.sentence(error.message))
        }
        var outcome = await DashboardFCMCheck.run(client)
        if !own { outcome.via = "built-in FCM emulator" }
        return outcome
    }
}

/// The FCM credential check, apart from the dashboard: an access token from the service
/// account's `token_uri` (a refusal there means the key is bad), then a `validate_only` message
/// to a registration token no device holds, which FCM checks and never delivers. Working
/// credentials get 400 `INVALID_ARGUMENT` about the token; 403 or 404 mean the project, or its
/// FCM API, is wrong; 401 that FCM refused the access token.
enum DashboardFCMCheck {
    /// What the check found: a verdict in a few words and what it means.
    struct Outcome: Sendable, Hashable {
        var working: Bool
        var verdict: String
        var message: String
        /// Where it was checked, when not with the app's own account: the built-in emulator.
        var via: String?
    }

    static let probeToken = "herald-check-invalid-token"
    /// The message sent: validated by FCM, never delivered (and to no device).
    static let probeBody = Array(#"{"validate_only":true,"message":{"token":"\#(probeToken)","notification":{"title":"check"}}}"#.utf8)

    /// Runs the check with `client`: a new access token whatever the one in hand, then the probe.
    static func run(_ client: FCMClient) async -> Outcome {
        do {
            // A margin longer than any token lives: always a new grant.
            try await client.renewAccessToken(within: .seconds(400 * 86_400))
        } catch {
            return Self.verdict(grant: error, send: nil, projectID: client.key.projectID)
        }
        return Self.verdict(grant: nil, send: await client.send(Self.probeBody), projectID: client.key.projectID)
    }

    /// The outcome from the grant's failure (when it failed) or the probe's answer.
    static func verdict(grant: FCMError?, send: Result<String, FCMError>?, projectID: String) -> Outcome {
        if let error = grant ?? Self.grantFailure(send) { return Self.grantVerdict(error) }
        switch send {
        case nil:
            return Outcome(working: false, verdict: "not checked", message: "No message was sent.")
        case .success:
            return Outcome(
                working: true, verdict: "key and project OK",
                message: "FCM took the access token and validated the check message (validate only: nothing was delivered).")
        case .failure(let error):
            let answer = "FCM answered \(error.status.map { "\($0) " } ?? "")\(error.code): \(Self.quoted(error.message))"
            if error.code == "INVALID_ARGUMENT" || error.code == "UNREGISTERED", error.message.lowercased().contains("registration token") {
                return Outcome(
                    working: true, verdict: "key and project OK",
                    message:
                        "FCM took the access token and refused only the deliberately invalid registration token (\(answer)). Nobody was notified.")
            }
            if error.status == 401 || error.code == "UNAUTHENTICATED" {
                return Outcome(
                    working: false, verdict: "the access token was refused",
                    message:
                        "\(answer). The token endpoint granted a token FCM does not take: is token_uri Google's (https://oauth2.googleapis.com/token)?"
                )
            }
            if error.status == 403 || error.status == 404 || ["PERMISSION_DENIED", "NOT_FOUND", "SENDER_ID_MISMATCH"].contains(error.code) {
                return Outcome(
                    working: false, verdict: "the project or its API is wrong",
                    message:
                        "\(answer). The key is good, but FCM refused to send for project \(projectID): check the project id, that the Firebase Cloud Messaging API (V1) is enabled for it, and that the service account may send (Firebase Cloud Messaging API Admin)."
                )
            }
            if error.status == nil {
                return Outcome(working: false, verdict: "FCM could not be reached", message: "\(answer). Try again.")
            }
            return Outcome(working: false, verdict: "unexpected answer", message: "\(answer).")
        }
    }

    /// A send that failed for want of an access token: its grant's failure.
    private static func grantFailure(_ send: Result<String, FCMError>?) -> FCMError? {
        guard case .failure(let error)? = send, ["credentials_unusable", "token_grant_failed"].contains(error.code) else { return nil }
        return error
    }

    /// The outcome of a failed grant: the token endpoint refused the key (or it cannot sign), it
    /// failed, or it could not be reached.
    private static func grantVerdict(_ error: FCMError) -> Outcome {
        let message = Self.quoted(error.message)
        // Refused: the key or its assertion (invalid_grant, invalid_client, …), or a key that cannot sign.
        let refused =
            error.code == "credentials_unusable"
            || (error.code == "token_grant_failed" && (400..<500).contains(error.status ?? 0) && error.status != 429)
        if refused {
            return Outcome(
                working: false, verdict: "the key is bad",
                message:
                    "No access token: \(message) (\(error.status.map { "HTTP \($0)" } ?? "not sent")). Make a new key for the service account in the Firebase console (Project settings → Service accounts) and upload it."
            )
        }
        if let status = error.status {
            return Outcome(working: false, verdict: "the token endpoint failed", message: "No access token: \(message) (HTTP \(status)). Try again.")
        }
        return Outcome(working: false, verdict: "the token endpoint could not be reached", message: "No access token: \(message).")
    }

    /// A message from outside, as a clause: without a trailing full stop.
    private static func quoted(_ text: String) -> String {
        var text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        while text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
