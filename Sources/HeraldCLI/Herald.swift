// SPDX-License-Identifier: Apache-2.0
import ArgumentParser

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "Herald: a self-hosted push-notification provider for Apple platforms.",
        subcommands: [
            ServeCommand.self, MigrateCommand.self, RekeyCommand.self, EmulatorCommand.self, SendCommand.self, KeysCommand.self, TokenCommand.self,
            DeviceCommand.self, ChannelsCommand.self,
        ]
    )
}
