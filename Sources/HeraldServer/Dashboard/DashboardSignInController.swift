// SPDX-License-Identifier: Apache-2.0
import Foundation
import HTTPTypes
import HeraldCore
import Hummingbird

/// Sign-in with an admin key, and sign-out.
struct DashboardSignInController: Sendable {
    let dashboard: Dashboard

    struct LoginModel: Sendable {
        var error: String?
    }

    func register<Context: RequestContext>(on group: RouterGroup<Context>) {
        group.get("login") { request, _ in
            if try await self.dashboard.sessions.current(request) != nil { return DashboardViews.redirect("/dashboard") }
            return self.loginPage(error: nil)
        }
        group.post("login") { request, context in
            let form = try await DashboardForm.read(request)
            let token = (form["key"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            let address = self.dashboard.backend.clientAddress(request, peer: context)
            let key: StoredAPIKey
            do {
                key = try await self.dashboard.sessions.signIn(token, address: address)
            } catch let refusal as AuthenticationRefusal {
                var page = self.loginPage(
                    error: "Too many failed sign-ins from this address: try again in \(refusal.retryAfter) s.", status: .tooManyRequests)
                page.headers[.retryAfter] = String(refusal.retryAfter)
                return page
            } catch let error as HeraldError where error.code == "key_confined" {
                return self.loginPage(error: DashboardFormat.sentence(error.message), status: .forbidden)
            } catch let error as HeraldError where error.code == "key_expired" {
                return self.loginPage(error: "That key has expired.", status: .unauthorized)
            } catch is HeraldError {
                return self.loginPage(error: "That is not an admin key of this server.", status: .unauthorized)
            }
            var response = DashboardViews.redirect("/dashboard")
            // Behind a TLS-terminating proxy the cookie is marked for https only.
            let secure = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https"
            response.headers[.setCookie] = self.dashboard.sessions.cookie(for: key, secure: secure)
            return response
        }
        group.post("logout") { request, _ in
            _ = try await self.dashboard.sessions.authorized(request, form: try await DashboardForm.read(request))
            var response = DashboardViews.redirect("/dashboard/login")
            response.headers[.setCookie] = DashboardSessions.signedOutCookie
            return response
        }
    }

    func loginPage(error: String?, status: HTTPResponse.Status = .ok) -> Response {
        self.dashboard.views.response(
            DashboardView(template: .login, title: "Sign in", model: LoginModel(error: error)), session: nil, status: status)
    }
}
