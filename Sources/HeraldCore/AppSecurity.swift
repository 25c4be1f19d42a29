// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// An app's rules for what the register key — the one shipped inside the app, so held by anyone
/// with a copy of it — may do to the registry beyond registering its own token.
package struct AppSecurity: Sendable, Hashable {
    /// Binding a device to a user (or moving it to another) with a register key needs a user
    /// assertion signed by the app's backend. On for new apps; off only while migrating apps
    /// that cannot send assertions yet.
    package var userVerification: Bool
    /// User assertions without a `tkh` claim (bound to no device) are accepted. Off for new
    /// apps; on for apps created before assertions were bound, until their backends send bound
    /// ones (``UserAssertion``).
    package var unboundAssertions: Bool
    /// The app's own rate limits over the server's (``AppRateLimits``); empty: the server's alone.
    package var rateLimits: AppRateLimits
    /// Tags only the backend (send and admin keys) may set: a register key can neither add nor
    /// remove them, and a registration with a register key keeps them as they are.
    package var protectedTags: [String]
    /// The secret user assertions are signed with (HMAC-SHA256), sealed under the master key;
    /// nil until the app's admin makes one.
    package var sealedUserSecret: [UInt8]?
    /// Each alert and background push carries a receipt id (``ReceiptID``, payload key `hr`) and
    /// the register key may report deliveries received and opened. On by default.
    package var receipts: Bool
    /// The app's quiet hours (a delivery policy kept with the app's other settings): alerts
    /// accepted while set wait for their device's window to end. Nil: none.
    package var quietHours: QuietHours?
    /// The app's frequency cap: alerts accepted while set count per person, and one over it is
    /// failed or deferred. Nil: none.
    package var frequencyCap: FrequencyCap?
    /// The app's default throttle for its sends (``Throttle``); nil: none.
    package var throttlePerMinute: Int?

    package init(
        userVerification: Bool = true, protectedTags: [String] = [], sealedUserSecret: [UInt8]? = nil, receipts: Bool = true,
        quietHours: QuietHours? = nil, frequencyCap: FrequencyCap? = nil, throttlePerMinute: Int? = nil, unboundAssertions: Bool = false,
        rateLimits: AppRateLimits = AppRateLimits()
    ) {
        self.rateLimits = rateLimits
        self.unboundAssertions = unboundAssertions
        self.throttlePerMinute = throttlePerMinute
        self.frequencyCap = frequencyCap
        self.quietHours = quietHours
        self.receipts = receipts
        self.userVerification = userVerification
        self.protectedTags = protectedTags
        self.sealedUserSecret = sealedUserSecret
    }
}

/// What the caller of a registration may change beyond its token's own details.
package struct RegistrationAuthority: Sendable, Hashable {
    /// May set the device's user to the registration's user (a send or admin key, an app without
    /// user verification, or a user assertion verified for exactly that user).
    package var mayBindUser: Bool
    /// Tags the caller may neither add nor remove (empty for send and admin keys).
    package var protectedTags: Set<String>

    package init(mayBindUser: Bool, protectedTags: Set<String>) {
        self.mayBindUser = mayBindUser
        self.protectedTags = protectedTags
    }

    /// The app's backend: send and admin keys.
    package static let backend = RegistrationAuthority(mayBindUser: true, protectedTags: [])

    /// Whether the policy needs what the device holds now (its user; its tags when some are
    /// protected): the backend's registrations skip reading it.
    package var readsDevice: Bool { !self.mayBindUser || !self.protectedTags.isEmpty }
    /// Whether the policy needs the device's tags too.
    package var readsTags: Bool { !self.protectedTags.isEmpty }
}

/// The registry's rules for a registration, given what the device holds now. Both store drivers
/// call it inside the registration's transaction, after reading the device.
package enum RegistrationPolicy {
    /// `registration` as it may be stored over `existing` (nil for a new token), or the refusal:
    /// - binding a token to a user, or moving it to another, needs ``RegistrationAuthority/mayBindUser``
    ///   (`user_assertion_required`); keeping the user it has, or dropping it (a logout, as an
    ///   unregister and a new anonymous registration could do anyway), does not;
    /// - a protected tag cannot be asked for (`tag_protected`), and the device's protected tags are kept.
    package static func apply(
        _ registration: DeviceRegistration, existing: (userID: String?, tags: [String])?, authority: RegistrationAuthority
    ) throws -> DeviceRegistration {
        if !authority.mayBindUser, let user = registration.userID, user != existing?.userID {
            throw HeraldError(
                code: "user_assertion_required",
                "binding a device to a user with a register key needs a user assertion from the app's backend (userAssertion)"
            )
        }
        guard !authority.protectedTags.isEmpty else { return registration }
        if let tag = registration.tags.first(where: authority.protectedTags.contains) {
            throw HeraldError(code: "tag_protected", "the tag '\(tag)' is set by the app's backend only")
        }
        var result = registration
        let kept = (existing?.tags ?? []).filter(authority.protectedTags.contains)
        result.tags = Array(Set(registration.tags).union(kept)).sorted()
        return result
    }
}

/// A list of tags as one column: a JSON array of strings.
package enum StoredTags {
    package static func encode(_ tags: [String]) -> String {
        String(decoding: JSONValue.array(tags.map(JSONValue.string)).serialized(), as: UTF8.self)
    }

    package static func decode(_ text: String?) -> [String] {
        guard let text, let value = try? JSONValue.parse(Array(text.utf8)) else { return [] }
        return value.arrayValue?.compactMap(\.stringValue) ?? []
    }
}
