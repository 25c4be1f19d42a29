// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import Foundation
import HeraldTesting
import Testing

/// `herald channels` and `herald send --channel` as a user runs them, against an emulator over
/// real sockets.
@Suite(.heavy) struct ChannelsCommandTests {
    func arguments(_ fixture: EmulatorFixture, _ command: [String]) throws -> [String] {
        let keyFile = try fixture.directory.write("AuthKey.p8", fixture.key.privateKeyPEM)
        return command + [
            "--key-file", keyFile, "--key-id", EmulatorFixture.keyID, "--team-id", EmulatorFixture.teamID,
            "--host", "127.0.0.1", "--port", "\(fixture.emulator.ports[.development]!)", "--ca-file", fixture.caFile,
        ]
    }

    func herald(_ fixture: EmulatorFixture, _ command: [String], _ rest: [String] = []) async throws -> ProcessResult {
        try await ProcessRunner.run(BackgroundProcess.heraldExecutable, try self.arguments(fixture, command) + rest)
    }

    @Test("create, list, read and delete a channel; a deleted channel is an APNs refusal, exit status 1")
    func lifecycle() async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            let bundle = ["--bundle-id", EmulatorFixture.bundleID]
            let created = try await self.herald(fixture, ["channels", "create"], bundle + ["--storage-policy", "1"])
            #expect(created.exitCode == 0, "\(created.standardError)")
            let id = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(!id.isEmpty)
            let list = try await self.herald(fixture, ["channels", "list"], bundle)
            #expect(list.exitCode == 0)
            #expect(list.standardOutput.split(separator: "\n").map(String.init) == [id])
            let read = try await self.herald(fixture, ["channels", "read", id], bundle)
            #expect(read.exitCode == 0)
            #expect(read.standardOutput.contains("message-storage-policy=1"))
            let deleted = try await self.herald(fixture, ["channels", "delete", id], bundle)
            #expect(deleted.exitCode == 0, "\(deleted.standardError)")
            let again = try await self.herald(fixture, ["channels", "read", id], bundle)
            #expect(again.exitCode == 1)
            #expect(again.standardError.contains("400 ChannelNotRegistered"), "\(again.standardError)")
            let bad = try await self.herald(fixture, ["channels", "create"], bundle + ["--storage-policy", "2"])
            #expect(bad.exitCode == 64)
        }
    }

    @Test("send --channel broadcasts one update that every subscriber receives")
    func sendToChannel() async throws {
        try await withEmulatorFixture(clock: EmulatorClock()) { fixture in
            let created = try await self.herald(fixture, ["channels", "create"], ["--bundle-id", EmulatorFixture.bundleID])
            let id = created.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            var tokens: [String] = []
            for _ in 0..<2 {
                let token = try await fixture.createDevice(kind: "liveactivity")
                try await fixture.control("POST", "/v1/devices/\(token)/channels", json: #"{"channelId":"\#(id)"}"#)
                tokens.append(token)
            }
            let payload = #"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":2}}}"#
            let sent = try await self.herald(
                fixture, ["send"],
                ["--topic", EmulatorFixture.bundleID, "--push-type", "liveactivity", "--channel", id, "--priority", "5", "--payload", payload])
            #expect(sent.exitCode == 0, "\(sent.standardError)")
            #expect(sent.standardOutput.hasPrefix("accepted apns-request-id="))
            #expect(sent.standardOutput.contains("apns-unique-id="))
            for token in tokens {
                let inbox = try await fixture.inbox(token)
                #expect(inbox.count == 1)
                #expect(inbox.first?["channelId"] as? String == id)
            }
            let unknown = try await self.herald(
                fixture, ["send"],
                ["--topic", EmulatorFixture.bundleID, "--push-type", "liveactivity", "--channel", "dW5rbm93bg==", "--payload", payload])
            #expect(unknown.exitCode == 1)
            #expect(unknown.standardError.contains("ChannelNotRegistered"))
            let withToken = try await self.herald(
                fixture, ["send"],
                ["--topic", EmulatorFixture.bundleID, "--push-type", "liveactivity", "--channel", id, "--token", tokens[0], "--payload", payload])
            #expect(withToken.exitCode == 64)
        }
    }
}
