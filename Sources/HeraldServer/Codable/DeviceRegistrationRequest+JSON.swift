// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI

extension DeviceRegistrationRequest {
    /// The request read straight from its JSON object, in one pass over the members, when every
    /// member is one of its fields, given once, with a string (`tags`: an array of strings) or
    /// null; nil for any other object, which ``APIRequestDecoder`` then reads, and refuses with
    /// the API's error where it does not fit. What this reads, the decoder reads alike (a test
    /// holds the two together); it is the registration lane's reading of the body that every
    /// installed app sends.
    init?(plainJSON json: JSONValue) {
        guard case .object(let members) = json else { return nil }
        self.init()
        // The fields read so far, a bit each: each field once.
        var seen: UInt16 = 0
        for (name, value) in members {
            /// `value` into `field` (the field numbered `bit`) when it is a string or null.
            func text(_ bit: UInt16, _ field: inout String?) -> Bool {
                guard seen & (1 << bit) == 0 else { return false }
                seen |= 1 << bit
                switch value {
                case .null: field = nil
                case .string(let string): field = string
                default: return false
                }
                return true
            }
            /// `value` into `tags` when it is an array of strings or null.
            func tags() -> Bool {
                guard seen & (1 << 12) == 0 else { return false }
                seen |= 1 << 12
                switch value {
                case .null:
                    self.tags = nil
                case .array(let items):
                    var tags: [String] = []
                    tags.reserveCapacity(items.count)
                    for item in items {
                        guard case .string(let tag) = item else { return false }
                        tags.append(tag)
                    }
                    self.tags = tags
                default:
                    return false
                }
                return true
            }
            let read: Bool
            switch name {
            case "kind": read = text(0, &self.kind)
            case "environment": read = text(1, &self.environment)
            case "userId": read = text(2, &self.userId)
            case "locale": read = text(3, &self.locale)
            case "timeZone": read = text(4, &self.timeZone)
            case "appVersion": read = text(5, &self.appVersion)
            case "platform": read = text(6, &self.platform)
            case "activityId": read = text(7, &self.activityId)
            case "attributesType": read = text(8, &self.attributesType)
            case "publicKey": read = text(9, &self.publicKey)
            case "publicKeyType": read = text(10, &self.publicKeyType)
            case "userAssertion": read = text(11, &self.userAssertion)
            case "tags": read = tags()
            default: read = false
            }
            guard read else { return nil }
        }
    }
}
