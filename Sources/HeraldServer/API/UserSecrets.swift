// SPDX-License-Identifier: Apache-2.0
import HeraldCore

/// An app's user secret, opened from its sealed form.
enum UserSecrets {
    static func open(_ app: App, secrets: SecretBox) throws -> [UInt8] {
        guard let sealed = app.security.sealedUserSecret else {
            throw HeraldError(
                code: "no_user_secret", "the app has no user secret to check assertions with: make one with POST /v1/apps/\(app.id)/user-secret"
            )
        }
        do {
            return try secrets.open(sealed)
        } catch {
            throw HeraldError(code: "credentials_unreadable", "the app's user secret cannot be opened with this master key")
        }
    }
}
