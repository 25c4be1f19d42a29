// SPDX-License-Identifier: Apache-2.0
import APNSModels
import ArgumentParser
import Foundation

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an ES256 provider token (JWT) for curl or h2load.",
        discussion: "The token is valid for an hour. Treat it as a secret: it lets its holder push to your apps."
    )

    @Option(help: "The .p8 signing key.")
    var keyFile: String

    @Option(help: "The key's 10-character id.")
    var keyId: String

    @Option(help: "Your 10-character team id.")
    var teamId: String

    @Option(help: "Issue time (UNIX seconds); default now.")
    var issuedAt: Int64?

    func run() throws {
        let pem: String
        do {
            pem = try String(contentsOfFile: self.keyFile, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read \(self.keyFile)")
        }
        let key = try SigningKey(pem: pem, keyID: self.keyId, teamID: self.teamId)
        print(try key.providerToken(issuedAt: self.issuedAt ?? Int64(Date().timeIntervalSince1970)))
    }
}
