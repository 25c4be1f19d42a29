// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// Broadcasts and channel management through the client to the emulator, over real TLS sockets.
@Suite(.heavy) struct ClientBroadcastTests {
    static let update = Array(#"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":1}}}"#.utf8)
    static let unknownChannel = APNSChannelID(rawValue: "dW5rbm93bi1jaGFubmVsLWlk")!

    /// The APNs reason of a client error, when APNs rejected the request.
    func reason(_ body: () async throws -> Any) async -> APNSReason? {
        let error = await clientError(body)
        guard error?.code == .rejected else { return nil }
        return error?.reason
    }

    @Test("create, read, list and delete a channel on the channel-management pool, lazily opened")
    func lifecycle() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let requestID = UUIDText.random()
                let created = try await client.createChannel(
                    bundleID: EmulatorFixture.bundleID, storagePolicy: .mostRecentMessageStored, requestID: requestID)
                #expect(created.requestID == requestID, "the request id comes back")
                let read = try await client.channel(created.channelID, bundleID: EmulatorFixture.bundleID)
                #expect(read.messageStoragePolicy == .mostRecentMessageStored)
                #expect(read.pushType.lowercased() == "liveactivity")
                #expect(read.requestID != nil)
                let other = try await client.createChannel(bundleID: EmulatorFixture.bundleID, storagePolicy: .noMessageStored)
                #expect(try await client.channel(other.channelID, bundleID: EmulatorFixture.bundleID).messageStoragePolicy == .noMessageStored)
                #expect(Set(try await client.channels(bundleID: EmulatorFixture.bundleID)) == [created.channelID, other.channelID])
                try await client.deleteChannel(created.channelID, bundleID: EmulatorFixture.bundleID)
                #expect(try await client.channels(bundleID: EmulatorFixture.bundleID) == [other.channelID])
                #expect(
                    await self.reason { try await client.channel(created.channelID, bundleID: EmulatorFixture.bundleID) }
                        == .channelNotRegistered)
                #expect(await client.openConnections() == 0, "channel management has its own pool: the device pool never opened")
            }
        }
    }

    @Test("one broadcast reaches every subscriber of the channel, with apns-request-id and apns-unique-id")
    func broadcastReachesSubscribers() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let channel = try await client.createChannel(bundleID: EmulatorFixture.bundleID, storagePolicy: .noMessageStored)
                var subscribers: [String] = []
                for _ in 0..<3 {
                    let token = try await fixture.createDevice(kind: "liveactivity")
                    let response = try await fixture.control(
                        "POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(channel.channelID.rawValue)"}"#)
                    #expect((200..<300).contains(response.status))
                    subscribers.append(token)
                }
                let bystander = try await fixture.createDevice(kind: "liveactivity")
                let requestID = UUIDText.random()
                let delivery = try await client.broadcast(
                    APNSBroadcastRequest(
                        channelID: channel.channelID, bundleID: EmulatorFixture.bundleID, payload: Self.update, priority: .throttled,
                        requestID: requestID))
                #expect(delivery.requestID == requestID)
                #expect(delivery.uniqueID != nil)
                for token in subscribers {
                    let inbox = try await fixture.inbox(token)
                    #expect(inbox.count == 1)
                    #expect(inbox.first?["channelId"] as? String == channel.channelID.rawValue)
                }
                #expect(try await fixture.inbox(bystander).isEmpty)
            }
        }
    }

    @Test("broadcasts and device pushes share one connection and its header table, each answered as its own kind")
    func interleaved() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let channel = try await client.createChannel(bundleID: EmulatorFixture.bundleID, storagePolicy: .noMessageStored)
                let subscriber = try await fixture.createDevice(kind: "liveactivity")
                try await fixture.control("POST", "/v1/devices/\(subscriber)/channels", json: #"{"channelId":"\#(channel.channelID.rawValue)"}"#)
                let device = try await fixture.createDevice()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for round in 0..<20 {
                        group.addTask {
                            let delivery = try await client.send(try alert(device))
                            #expect(delivery.apnsID != nil)
                        }
                        group.addTask {
                            let body = #"{"aps":{"timestamp":\#(1_700_000_000 + round),"event":"update","content-state":{"n":\#(round)}}}"#
                            let delivery = try await client.broadcast(
                                APNSBroadcastRequest(channelID: channel.channelID, bundleID: EmulatorFixture.bundleID, payload: Array(body.utf8)))
                            #expect(delivery.uniqueID != nil)
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(await client.openConnections() == 1)
                #expect(try await fixture.inbox(device).count == 20)
                #expect(try await fixture.inbox(subscriber).count == 20)
            }
        }
    }

    @Test("Apple's channel errors come back as rejections with their reason and failure class")
    func appleErrors() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let bundle = EmulatorFixture.bundleID
                let unknown = Self.unknownChannel
                #expect(
                    await self.reason { try await client.broadcast(APNSBroadcastRequest(channelID: unknown, bundleID: bundle, payload: Self.update)) }
                        == .channelNotRegistered)
                #expect(await self.reason { try await client.channel(unknown, bundleID: bundle) } == .channelNotRegistered)
                #expect(await self.reason { try await client.deleteChannel(unknown, bundleID: bundle) } == .channelNotRegistered)
                let short = APNSChannelID(rawValue: "A")!  // base64 of no whole byte
                #expect(await self.reason { try await client.channel(short, bundleID: bundle) } == .badChannelId)
                #expect(
                    await self.reason { try await client.broadcast(APNSBroadcastRequest(channelID: short, bundleID: bundle, payload: Self.update)) }
                        == .badChannelId)
                let channel = try await client.createChannel(bundleID: bundle, storagePolicy: .noMessageStored)
                let error = await clientError {
                    try await client.broadcast(
                        APNSBroadcastRequest(channelID: channel.channelID, bundleID: bundle, payload: Self.update, expiration: 4_000_000_000))
                }
                #expect(error?.reason == .badExpirationDate)
                #expect(error?.status == 400)
                #expect(error?.failureClass == .fixAndDrop)
                #expect(
                    await self.reason {
                        try await client.broadcast(
                            APNSBroadcastRequest(channelID: channel.channelID, bundleID: bundle + ".push-type.liveactivity", payload: Self.update))
                    } == .topicDisallowed)
            }
        }
    }

    @Test("the 10,000th channel of an app is the last: CannotCreateChannelConfig")
    func channelLimit() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let bundle = EmulatorFixture.bundleID
                // 50 at a time: the answers come back on one connection of the management pool.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for worker in 0..<50 {
                        group.addTask {
                            for _ in stride(from: worker, to: 10_000, by: 50) {
                                _ = try await client.createChannel(bundleID: bundle, storagePolicy: .noMessageStored)
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                #expect(
                    await self.reason { try await client.createChannel(bundleID: bundle, storagePolicy: .noMessageStored) }
                        == .cannotCreateChannelConfig)
                // The list (~250 KB) is larger than a stream's initial window: the client opens it.
                #expect(try await client.channels(bundleID: bundle).count == 10_000)
            }
        }
    }

    @Test("requests APNs would refuse are refused before the wire")
    func localRefusals() async throws {
        try await withEmulatorFixture { fixture in
            try await fixture.withClient { client in
                let bundle = EmulatorFixture.bundleID
                let channel = Self.unknownChannel
                func code(_ request: APNSBroadcastRequest) async -> APNSValidationError.Code? {
                    await clientError { try await client.broadcast(request) }?.validation?.code
                }
                #expect(await code(APNSBroadcastRequest(channelID: channel, bundleID: bundle, payload: [])) == .payloadEmpty)
                #expect(
                    await code(APNSBroadcastRequest(channelID: channel, bundleID: bundle, payload: Array(repeating: UInt8(ascii: " "), count: 5121)))
                        == .payloadTooLarge)
                #expect(await code(APNSBroadcastRequest(channelID: channel, bundleID: bundle, payload: Array("{".utf8))) == .payloadNotJSON)
                #expect(await code(APNSBroadcastRequest(channelID: channel, bundleID: "com.example/../x", payload: Self.update)) == .badTopic)
                #expect(
                    await code(APNSBroadcastRequest(channelID: channel, bundleID: bundle, payload: Self.update, requestID: "nope")) == .badMessageID)
                #expect(APNSChannelID(rawValue: "a b") == nil)
                #expect(APNSChannelID(rawValue: "abc\r\nx: y") == nil)
                let accepted = try await fixture.counter("accepted")
                #expect(accepted == 0)
                #expect(await client.openConnections() == 0, "nothing went on the wire")
            }
        }
    }
}
