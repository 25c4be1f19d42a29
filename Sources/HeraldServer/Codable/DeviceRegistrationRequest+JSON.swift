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
        var seen: UInt16 = 0
        for (name, value) in members {
            // The field's place, which is also its bit in `seen`: each field once.
            let field: Int
            switch name {
            case "kind": field = 0
            case "environment": field = 1
            case "userId": field = 2
            case "locale": field = 3
            case "timeZone": field = 4
            case "appVersion": field = 5
            case "platform": field = 6
            case "activityId": field = 7
            case "attributesType": field = 8
            case "publicKey": field = 9
            case "publicKeyType": field = 10
            case "userAssertion": field = 11
            case "tags": field = 12
            default: return nil
            }
            guard seen & (1 << field) == 0 else { return nil }
            seen |= 1 << field
            if field == 12 {
                switch value {
                case .null:
                    self.tags = nil
                case .array(let items):
                    var tags: [String] = []
                    tags.reserveCapacity(items.count)
                    for item in items {
                        guard case .string(let tag) = item else { return nil }
                        tags.append(tag)
                    }
                    self.tags = tags
                default:
                    return nil
                }
                continue
            }
            let text: String?
            switch value {
            case .null: text = nil
            case .string(let string): text = string
            default: return nil
            }
            switch field {
            case 0: self.kind = text
            case 1: self.environment = text
            case 2: self.userId = text
            case 3: self.locale = text
            case 4: self.timeZone = text
            case 5: self.appVersion = text
            case 6: self.platform = text
            case 7: self.activityId = text
            case 8: self.attributesType = text
            case 9: self.publicKey = text
            case 10: self.publicKeyType = text
            default: self.userAssertion = text
            }
        }
    }
}
