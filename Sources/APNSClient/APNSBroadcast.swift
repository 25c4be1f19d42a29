// SPDX-License-Identifier: Apache-2.0
public import APNSModels
import APNSTransport
import NIOCore
import Synchronization

/// A broadcast channel's id, as APNs made it (base64; Apple says not to assume its length).
public struct APNSChannelID: Sendable, Hashable, RawRepresentable, CustomStringConvertible {
    public let rawValue: String

    /// Any non-empty base64 string (standard alphabet, `=` padding) up to 1024 characters: what
    /// may go into an `apns-channel-id` header.
    public init?(rawValue: String) {
        let utf8 = rawValue.utf8
        guard !utf8.isEmpty, utf8.count <= 1024 else { return nil }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
                continue
            default: return nil
            }
        }
        self.rawValue = rawValue
    }

    public var description: String { self.rawValue }
}

/// How a channel keeps messages for subscribers that are offline, fixed when it is created.
public enum APNSMessageStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// Nothing stored; broadcasts need `apns-expiration: 0`. A higher publishing budget.
    case noMessageStored = 0
    /// The newest message is kept up to 8 hours (less with `apns-expiration`).
    case mostRecentMessageStored = 1
}

/// One Live Activity update or end sent to every subscriber of a channel
/// (`POST /4/broadcasts/apps/<bundle>`).
public struct APNSBroadcastRequest: Sendable {
    public var channelID: APNSChannelID
    /// The app's bundle id (no push-type suffix: APNs refuses one with `TopicDisallowed`).
    public var bundleID: String
    public var priority: Priority
    /// `apns-expiration` in seconds since 1970; `0` (the default) is the only value a
    /// No-Message-Stored channel takes.
    public var expiration: Int64
    /// `apns-request-id`: a UUID of yours, echoed; APNs makes one up when nil.
    public var requestID: String?
    /// The payload as sent: UTF-8 JSON, at most 5120 bytes.
    public var payload: [UInt8]

    public init(
        channelID: APNSChannelID, bundleID: String, payload: [UInt8], priority: Priority = .immediate, expiration: Int64 = 0,
        requestID: String? = nil
    ) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.requestID = requestID
    }

    public static let maximumPayloadBytes = 5120

    /// The rules APNs would refuse it for that can be checked here.
    public func validate() throws(APNSValidationError) {
        try APNSBroadcastRequest.validateBundleID(self.bundleID)
        if let requestID = self.requestID { try APNSBroadcastRequest.validateRequestID(requestID) }
        guard self.expiration >= 0 else { throw APNSValidationError(.badExpiration, "the expiration is negative") }
        guard !self.payload.isEmpty else { throw APNSValidationError(.payloadEmpty, "the payload is empty") }
        guard self.payload.count <= Self.maximumPayloadBytes else {
            throw APNSValidationError(
                .payloadTooLarge, "the payload is \(self.payload.count) bytes; broadcasts allow \(Self.maximumPayloadBytes)")
        }
        do {
            try JSONValue.validate(self.payload)
        } catch {
            throw APNSValidationError(.payloadNotJSON, "the payload is not JSON: \(error)")
        }
    }

    /// A bundle id goes into the path: letters, digits, `.`, `-` and `_` only.
    static func validateBundleID(_ bundleID: String) throws(APNSValidationError) {
        let utf8 = bundleID.utf8
        guard !utf8.isEmpty, utf8.count <= 255 else { throw APNSValidationError(.badTopic, "the bundle id is empty or too long") }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default: throw APNSValidationError(.badTopic, "the bundle id may hold letters, digits, '.', '-' and '_' only")
            }
        }
    }

    static func validateRequestID(_ requestID: String) throws(APNSValidationError) {
        let utf8 = Array(requestID.utf8)
        let dashes = [8, 13, 18, 23]
        guard utf8.count == 36,
            utf8.enumerated().allSatisfy({ index, byte in
                dashes.contains(index) ? byte == UInt8(ascii: "-") : (byte < 128 && Character(Unicode.Scalar(byte)).isHexDigit)
            })
        else { throw APNSValidationError(.badMessageID, "the request id is not a UUID") }
    }
}

/// What APNs answered for an accepted broadcast.
public struct APNSBroadcastDelivery: Sendable, Hashable {
    /// `apns-request-id` (the request's own when it set one).
    public var requestID: String?
    /// `apns-unique-id`: the message's id for Apple's delivery log.
    public var uniqueID: String?
}

/// A channel created by ``APNSClient/createChannel(bundleID:storagePolicy:requestID:timeout:)``.
public struct APNSCreatedChannel: Sendable, Hashable {
    public var channelID: APNSChannelID
    public var requestID: String?
}

/// A channel's configuration, as `GET /1/apps/<bundle>/channels` reports it.
public struct APNSChannelConfiguration: Sendable, Hashable {
    public var messageStoragePolicy: APNSMessageStoragePolicy
    /// `push-type` as APNs spells it (`LiveActivity`).
    public var pushType: String
    public var requestID: String?
}

/// A request that is not a device push (broadcast, channel management): its own method, path and
/// headers, and a box the connection fills with the answer's status, body and channel id. Device
/// pushes carry none, so their path pays one nil check.
final class ExtraRequest: Sendable {
    struct Answer: Sendable {
        var status = 0
        var channelID: String?
        var body: [UInt8] = []
    }

    let method: String
    let path: String
    let headers: [(name: String, value: String, indexing: APNSHeaderEncoder.Indexing)]
    private let answer = Mutex(Answer())

    init(method: String, path: String, headers: [(name: String, value: String, indexing: APNSHeaderEncoder.Indexing)]) {
        self.method = method
        self.path = path
        self.headers = headers
    }

    func received(channelID: String) { self.answer.withLock { $0.channelID = channelID } }

    func answered(status: Int, body: ByteBuffer?) {
        self.answer.withLock {
            $0.status = status
            $0.body = body.map { Array($0.readableBytesView) } ?? []
        }
    }

    var result: Answer { self.answer.withLock { $0 } }

    /// The device-push shape a pending request needs; never sent.
    static let placeholder: DeviceToken = try! DeviceToken(hex: "00")
}

extension APNSClient {
    /// Sends one broadcast on a channel, on the device-push pool. Returns APNs's acceptance;
    /// throws ``APNSClientError`` as ``send(_:timeout:)`` does (`rejected` with Apple's reason:
    /// `ChannelNotRegistered`, `BadExpirationDate`, `FeatureNotEnabled`, …).
    @discardableResult
    public func broadcast(_ request: APNSBroadcastRequest, timeout: Duration? = nil) async throws(APNSClientError) -> APNSBroadcastDelivery {
        do {
            try request.validate()
        } catch {
            throw APNSClientError.invalid(error)
        }
        var headers: [(name: String, value: String, indexing: APNSHeaderEncoder.Indexing)] = [
            ("apns-channel-id", request.channelID.rawValue, .indexed),
            ("apns-push-type", "liveactivity", .indexed),
            ("apns-priority", String(request.priority.rawValue), .indexed),
            ("apns-expiration", String(request.expiration), .neverIndexed),
        ]
        if let requestID = request.requestID { headers.append(("apns-request-id", requestID, .neverIndexed)) }
        let extra = ExtraRequest(method: "POST", path: "/4/broadcasts/apps/" + request.bundleID, headers: headers)
        let (delivery, _) = try await self.sendExtra(extra, payload: request.payload, management: false, timeout: timeout)
        return APNSBroadcastDelivery(requestID: delivery.apnsID, uniqueID: delivery.uniqueID)
    }

    /// Creates a Live Activity channel (`POST /1/apps/<bundle>/channels`, 201 with
    /// `apns-channel-id`). APNs allows 10,000 per app and environment (`CannotCreateChannelConfig`).
    public func createChannel(
        bundleID: String, storagePolicy: APNSMessageStoragePolicy, requestID: String? = nil, timeout: Duration? = nil
    ) async throws(APNSClientError) -> APNSCreatedChannel {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let (delivery, answer) = try await self.manage(
            "POST", "channels", bundleID: bundleID, channelID: nil, requestID: requestID, body: Array(body.utf8), timeout: timeout)
        guard let raw = answer.channelID, let channelID = APNSChannelID(rawValue: raw) else {
            throw APNSClientError(code: .rejected, message: "APNs created a channel without a usable apns-channel-id", status: answer.status)
        }
        return APNSCreatedChannel(channelID: channelID, requestID: delivery.apnsID)
    }

    /// A channel's configuration (`GET /1/apps/<bundle>/channels`).
    public func channel(
        _ channelID: APNSChannelID, bundleID: String, requestID: String? = nil, timeout: Duration? = nil
    ) async throws(APNSClientError) -> APNSChannelConfiguration {
        let (delivery, answer) = try await self.manage(
            "GET", "channels", bundleID: bundleID, channelID: channelID, requestID: requestID, body: [], timeout: timeout)
        guard case .object(let object)? = try? JSONValue.parse(answer.body),
            case .int(let policyNumber)? = object.first(where: { $0.0 == "message-storage-policy" })?.1,
            let policy = APNSMessageStoragePolicy(rawValue: Int(policyNumber))
        else {
            throw APNSClientError(code: .rejected, message: "APNs answered a channel read without a storage policy", status: answer.status)
        }
        var pushType = "LiveActivity"
        if case .string(let value)? = object.first(where: { $0.0 == "push-type" })?.1 { pushType = value }
        return APNSChannelConfiguration(messageStoragePolicy: policy, pushType: pushType, requestID: delivery.apnsID)
    }

    /// Every channel of the app in this environment (`GET /1/apps/<bundle>/all-channels`).
    public func channels(bundleID: String, requestID: String? = nil, timeout: Duration? = nil) async throws(APNSClientError) -> [APNSChannelID] {
        let (_, answer) = try await self.manage(
            "GET", "all-channels", bundleID: bundleID, channelID: nil, requestID: requestID, body: [], timeout: timeout)
        guard case .object(let object)? = try? JSONValue.parse(answer.body),
            case .array(let items)? = object.first(where: { $0.0 == "channels" })?.1
        else {
            throw APNSClientError(code: .rejected, message: "APNs answered the channel list without `channels`", status: answer.status)
        }
        return items.compactMap { item in
            if case .string(let raw) = item { return APNSChannelID(rawValue: raw) }
            return nil
        }
    }

    /// Deletes a channel (`DELETE /1/apps/<bundle>/channels`, 204). Irreversible.
    public func deleteChannel(
        _ channelID: APNSChannelID, bundleID: String, requestID: String? = nil, timeout: Duration? = nil
    ) async throws(APNSClientError) {
        _ = try await self.manage("DELETE", "channels", bundleID: bundleID, channelID: channelID, requestID: requestID, body: [], timeout: timeout)
    }

    private func manage(
        _ method: String, _ resource: String, bundleID: String, channelID: APNSChannelID?, requestID: String?, body: [UInt8],
        timeout: Duration?
    ) async throws(APNSClientError) -> (APNSDelivery, ExtraRequest.Answer) {
        do {
            try APNSBroadcastRequest.validateBundleID(bundleID)
            if let requestID { try APNSBroadcastRequest.validateRequestID(requestID) }
        } catch {
            throw APNSClientError.invalid(error)
        }
        var headers: [(name: String, value: String, indexing: APNSHeaderEncoder.Indexing)] = []
        if let channelID { headers.append(("apns-channel-id", channelID.rawValue, .neverIndexed)) }
        if let requestID { headers.append(("apns-request-id", requestID, .neverIndexed)) }
        if !body.isEmpty { headers.append(("content-type", "application/json", .indexed)) }
        let extra = ExtraRequest(method: method, path: "/1/apps/\(bundleID)/\(resource)", headers: headers)
        return try await self.sendExtra(extra, payload: body, management: true, timeout: timeout)
    }
}
