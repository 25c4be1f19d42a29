// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import ArgumentParser
import Logging

/// `herald channels`: Apple's broadcast channels of one app and environment.
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, read and delete an app's Live Activity broadcast channels.",
        discussion: """
            Channel management goes to Apple's channel-management host (port 2195 in development, \
            2196 in production), or with --host to that host and --port (--management-port to \
            override). APNs allows 10,000 channels per app and environment. Exit status: 0 on \
            success, 1 when APNs refused, 64 on bad options.
            """,
        subcommands: [Create.self, List.self, Read.self, Delete.self]
    )

    struct Options: ParsableArguments {
        @OptionGroup(title: "Credentials (token or certificate)") var credentials: Credentials
        @OptionGroup(title: "Where") var target: Target
        @Option(help: "Channel-management port when --host is set (default: --port).") var managementPort: Int?
        @Option(help: "The app's bundle id.") var bundleId: String
        @Option(help: "Seconds the request may take.") var timeout: Double = 10

        /// Runs `body` with a client, printing APNs's refusal as `send` does; exit 1 on one.
        func withClient(_ body: (APNSClient) async throws(APNSClientError) -> Void) async throws {
            var configuration = try self.target.clientConfiguration(self.credentials, timeout: self.timeout)
            configuration.channelManagementPort = self.managementPort
            let client: APNSClient
            do {
                client = try APNSClient(configuration: configuration, logger: Logger(label: "herald.channels"))
            } catch {
                throw ValidationError(error.message)
            }
            var failure: APNSClientError?
            do {
                try await body(client)
            } catch {
                failure = error
            }
            await client.shutdown()
            if let failure {
                if failure.code == .invalidRequest { throw ValidationError(failure.message) }
                printError("failed: \(SendCommand.describe(failure))")
                throw ExitCode(1)
            }
        }

        func channelID(_ text: String) throws -> APNSChannelID {
            guard let id = APNSChannelID(rawValue: text) else { throw ValidationError("the channel id must be base64") }
            return id
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel; prints its id.")
        @OptionGroup var options: Options
        @Option(help: "Message storage policy: 0 (no message stored) or 1 (most recent message stored).") var storagePolicy = 0

        func run() async throws {
            guard let policy = APNSMessageStoragePolicy(rawValue: self.storagePolicy) else {
                throw ValidationError("--storage-policy must be 0 or 1")
            }
            try await self.options.withClient { client throws(APNSClientError) in
                let created = try await client.createChannel(bundleID: self.options.bundleId, storagePolicy: policy)
                print(created.channelID.rawValue)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channels, one id a line.")
        @OptionGroup var options: Options

        func run() async throws {
            try await self.options.withClient { client throws(APNSClientError) in
                for id in try await client.channels(bundleID: self.options.bundleId) { print(id.rawValue) }
            }
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's configuration.")
        @OptionGroup var options: Options
        @Argument(help: "The channel id (base64).") var channel: String

        func run() async throws {
            let id = try self.options.channelID(self.channel)
            try await self.options.withClient { client throws(APNSClientError) in
                let channel = try await client.channel(id, bundleID: self.options.bundleId)
                print("message-storage-policy=\(channel.messageStoragePolicy.rawValue) push-type=\(channel.pushType)")
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel (irreversible).")
        @OptionGroup var options: Options
        @Argument(help: "The channel id (base64).") var channel: String

        func run() async throws {
            let id = try self.options.channelID(self.channel)
            try await self.options.withClient { client throws(APNSClientError) in
                try await client.deleteChannel(id, bundleID: self.options.bundleId)
                print("deleted \(id.rawValue)")
            }
        }
    }
}
