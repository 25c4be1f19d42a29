// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldAPI

/// A response type that writes its own JSON: the bytes ``APIJSONEncoder`` would write through
/// its `Encodable` conformance, member for member (the tests hold the two together for every
/// such type), without a container, a key or a dynamic cast per member. For the answers Herald
/// sends most: the registration's, and the device lists'.
protocol JSONWritable {
    func writeJSON(into json: inout JSONObjectWriter)
}

/// One JSON object's members, written in order into `bytes`. Keys are plain names (nothing to
/// escape), as the response types' coding keys are.
struct JSONObjectWriter {
    private(set) var bytes: [UInt8] = []
    private var count = 0

    /// An object begun at the end of `bytes`, which it takes (their storage, not a copy) until
    /// ``finish()`` gives them back.
    init(taking bytes: inout [UInt8]) {
        swap(&self.bytes, &bytes)
        self.bytes.append(UInt8(ascii: "{"))
    }

    /// The object closed: its bytes.
    consuming func finish() -> [UInt8] {
        self.bytes.append(UInt8(ascii: "}"))
        return self.bytes
    }

    private mutating func key(_ key: StaticString) {
        if self.count > 0 { self.bytes.append(UInt8(ascii: ",")) }
        self.count += 1
        self.bytes.append(UInt8(ascii: "\""))
        key.withUTF8Buffer { self.bytes.append(contentsOf: $0) }
        self.bytes.append(contentsOf: "\":".utf8)
    }

    mutating func member(_ key: StaticString, _ value: String) {
        self.key(key)
        JSONValue.string(value).serialize(into: &self.bytes)
    }

    /// `null` when nil, as the encoder writes a nil it does not omit.
    mutating func member(_ key: StaticString, _ value: String?) {
        self.key(key)
        (value.map(JSONValue.string) ?? .null).serialize(into: &self.bytes)
    }

    mutating func member(_ key: StaticString, _ value: Bool) {
        self.key(key)
        JSONValue.bool(value).serialize(into: &self.bytes)
    }

    mutating func member(_ key: StaticString, _ value: Int64) {
        self.key(key)
        JSONValue.int(value).serialize(into: &self.bytes)
    }

    mutating func member(_ key: StaticString, _ value: Int64?) {
        self.key(key)
        (value.map(JSONValue.int) ?? .null).serialize(into: &self.bytes)
    }

    mutating func member(_ key: StaticString, _ values: [String]) {
        self.key(key)
        self.bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { self.bytes.append(UInt8(ascii: ",")) }
            JSONValue.string(value).serialize(into: &self.bytes)
        }
        self.bytes.append(UInt8(ascii: "]"))
    }

    /// An array of objects that write themselves.
    mutating func member(_ key: StaticString, _ values: [some JSONWritable]) {
        self.key(key)
        self.bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { self.bytes.append(UInt8(ascii: ",")) }
            value.json(into: &self.bytes)
        }
        self.bytes.append(UInt8(ascii: "]"))
    }
}

extension JSONWritable {
    /// Appends this value's object to `bytes`.
    func json(into bytes: inout [UInt8]) {
        var object = JSONObjectWriter(taking: &bytes)
        self.writeJSON(into: &object)
        bytes = object.finish()
    }
}

extension DeviceResponse: JSONWritable {
    func writeJSON(into json: inout JSONObjectWriter) {
        json.member("token", self.token)
        json.member("kind", self.kind)
        json.member("environment", self.environment)
        json.member("transport", self.transport)
        json.member("userId", self.userId)
        json.member("tags", self.tags)
        json.member("locale", self.locale)
        json.member("timeZone", self.timeZone)
        json.member("appVersion", self.appVersion)
        json.member("platform", self.platform)
        json.member("activityId", self.activityId)
        json.member("attributesType", self.attributesType)
        json.member("active", self.active)
        json.member("createdAt", self.createdAt)
        json.member("lastRegisteredAt", self.lastRegisteredAt)
        json.member("invalidatedAt", self.invalidatedAt)
        json.member("invalidationReason", self.invalidationReason)
        json.member("publicKeyType", self.publicKeyType)
        json.member("publicKey", self.publicKey)
        // Left out when nil (``OmitsNilFields``).
        if let endpoint = self.endpoint { json.member("endpoint", endpoint) }
        if let invalidations = self.invalidations { json.member("invalidations", invalidations) }
    }
}

extension DeviceResponse.Invalidation: JSONWritable {
    func writeJSON(into json: inout JSONObjectWriter) {
        json.member("reason", self.reason)
        json.member("apnsTimestamp", self.apnsTimestamp)
        json.member("at", self.at)
        json.member("applied", self.applied)
    }
}
