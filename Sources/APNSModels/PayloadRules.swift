// SPDX-License-Identifier: Apache-2.0

/// The rules a payload must meet for its push type, checked before anything is sent.
public enum PayloadRules {
    /// Throws `payloadTooLarge` when `size` bytes exceed the push type's limit (4096; 5120 for VoIP).
    public static func checkSize(_ size: Int, pushType: PushType) throws(APNSValidationError) {
        guard size > 0 else { throw APNSValidationError(.payloadEmpty, "the payload is empty") }
        guard size <= pushType.maximumPayloadSize else {
            throw APNSValidationError(
                .payloadTooLarge,
                "the payload is \(size) bytes; \(pushType) pushes allow \(pushType.maximumPayloadSize)"
            )
        }
    }

    /// Checks a payload against the rules of its push type.
    public static func check(_ payload: Payload, pushType: PushType) throws(APNSValidationError) {
        func fail(_ message: String) -> APNSValidationError { APNSValidationError(.payloadRule, message) }
        if payload.custom.contains(where: { $0.0 == "aps" }) {
            throw fail("custom data cannot use the key 'aps'")
        }
        let aps = payload.aps
        if let badge = aps.badge, badge < 0 { throw fail("aps.badge must not be negative") }
        if case .critical(_, let volume) = aps.sound, !(0...1).contains(volume) {
            throw fail("aps.sound.volume must be between 0 and 1")
        }
        if let score = aps.relevanceScore, pushType != .liveactivity, !(0...1).contains(score) {
            throw fail("aps.relevance-score must be between 0 and 1 (any number only for Live Activities)")
        }
        if aps.inputPushToken || aps.inputPushChannel != nil, aps.event != .start {
            throw fail("aps.input-push-token and aps.input-push-channel belong to Live Activity start events")
        }
        if let channel = aps.inputPushChannel, Base64URL.decode(channel) == nil {
            throw fail("aps.input-push-channel must be a base64 channel id")
        }
        if aps.inputPushToken && aps.inputPushChannel != nil {
            throw fail("a Live Activity is started with an update token or a channel, not both")
        }

        switch pushType {
        case .background:
            guard payload.includesAPS, aps.contentAvailable else {
                throw fail("background pushes need aps.content-available = 1")
            }
            guard aps.alert == nil, aps.badge == nil, aps.sound == nil else {
                throw fail("background pushes must not carry alert, badge or sound")
            }
        case .alert:
            guard payload.includesAPS else { throw fail("alert pushes need an aps dictionary") }
            guard aps.alert != nil || aps.badge != nil || aps.sound != nil || aps.contentAvailable else {
                throw fail("alert pushes need aps.alert, aps.badge or aps.sound")
            }
        case .liveactivity:
            try self.checkLiveActivity(aps, fail: fail)
        case .widgets, .controls:
            guard aps.contentChanged == true else { throw fail("\(pushType) pushes need aps.content-changed = true") }
        default:
            break
        }
        if pushType != .liveactivity, aps.event != nil || aps.contentState != nil || aps.attributesType != nil {
            throw fail("Live Activity keys (event, content-state, attributes-type) need the liveactivity push type")
        }
    }

    private static func checkLiveActivity(
        _ aps: APS,
        fail: (String) -> APNSValidationError
    ) throws(APNSValidationError) {
        guard let event = aps.event else { throw fail("Live Activity pushes need aps.event (start, update or end)") }
        guard aps.timestamp != nil else { throw fail("Live Activity pushes need aps.timestamp") }
        guard aps.contentState != nil else { throw fail("Live Activity pushes need aps.content-state") }
        switch event {
        case .start:
            guard aps.attributesType != nil, aps.attributes != nil else {
                throw fail("a Live Activity start needs aps.attributes-type and aps.attributes")
            }
            guard aps.alert != nil else { throw fail("a Live Activity start needs aps.alert") }
        case .update, .end:
            guard aps.attributesType == nil, aps.attributes == nil else {
                throw fail("aps.attributes-type and aps.attributes belong to start events")
            }
        }
        if aps.dismissalDate != nil, event != .end {
            throw fail("aps.dismissal-date belongs to end events")
        }
    }
}
