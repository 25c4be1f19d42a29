// SPDX-License-Identifier: Apache-2.0
import Foundation
import HTTPTypes
import HeraldCore
import HeraldTesting
import Testing

@testable import HeraldServer

/// The API's contract: the OpenAPI document, the router and the operations table agree, and
/// each error code has one status.
@Suite(.heavy) struct APIContractTests {
    /// `openapi.yaml` read with PyYAML: operation ("METHOD /path") → its statuses.
    static func documentedOperations() async throws -> [String: Set<Int>] {
        let file = Self.documentPath
        let script = """
            import json, sys, yaml
            doc = yaml.safe_load(open(sys.argv[1]))
            print(json.dumps({m.upper() + " " + p: sorted(int(s) for s in op["responses"]) for p, item in doc["paths"].items()
                              for m, op in item.items() if m in ("get", "put", "post", "delete", "patch")}))
            """
        let result = try await ProcessRunner.run("python3", ["-c", script, file])
        let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: [Int]]
        return try #require(object, "\(result)").mapValues(Set.init)
    }

    static var documentPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/HeraldServer/openapi.yaml").path
    }

    @Test("the OpenAPI document names exactly the routes the server answers, and each operation's statuses")
    func documentMatchesRouter() async throws {
        let documented = try await Self.documentedOperations()
        let directory = try TemporaryDirectory(prefix: "herald-contract")
        defer { directory.remove() }
        let routes = try await withHeraldServer(configuration: ServerTests.configuration(directory)) { server in
            Set(server.routes.filter { !$0.contains(" /dashboard") })
        }
        #expect(routes.subtracting(documented.keys).sorted() == [], "routes the document does not describe")
        #expect(Set(documented.keys).subtracting(routes).sorted() == [], "documented operations the server does not have")
        let declared = Dictionary(uniqueKeysWithValues: API.operations.map { ("\($0.method.rawValue) \($0.path)", $0.statuses) })
        #expect(Set(declared.keys) == routes, "the operations table covers every route")
        for (operation, statuses) in documented.sorted(by: { $0.key < $1.key }) {
            #expect(declared[operation] == statuses, "\(operation): declared \(declared[operation]?.sorted() ?? []), documented \(statuses.sorted())")
        }
    }

    /// Codes that mean Herald itself failed: a 500 is their status.
    static let internalCodes: Set<String> = [
        "internal_error", "internal", "seal_failed", "bad_master_key", "master_key_required", "credentials_unreadable", "listen_failed",
        "undeclared_status", "bad_database_url",
    ]

    @Test("every error code Herald's server targets throw has one deliberate status")
    func everyCodeHasAStatus() throws {
        let sources = URL(fileURLWithPath: Self.documentPath).deletingLastPathComponent().deletingLastPathComponent()
        var codes = Set<String>()
        for target in ["HeraldCore", "HeraldServer", "HeraldSQLite", "HeraldPostgres"] {
            let folder = sources.appendingPathComponent(target)
            let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter {
                $0.hasSuffix(".swift")
            }
            for file in files {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for match in text.matches(of: /code: "([a-z_A-Z]+)"/) { codes.insert(String(match.output.1)) }
            }
        }
        #expect(codes.count > 30, "the scan found the codes (\(codes.count))")
        for code in codes.sorted() {
            let status = HeraldError.status(forCode: code).code
            if Self.internalCodes.contains(code) {
                #expect(status == 500, "\(code) → \(status)")
            } else {
                #expect(status != 500, "\(code) has no deliberate status")
            }
        }
        // A few that clients branch on.
        #expect(HeraldError.status(forCode: "unknown_field").code == 400)
        #expect(HeraldError.status(forCode: "empty_notification").code == 400)
        #expect(HeraldError.status(forCode: "bad_priority").code == 422)
        #expect(HeraldError.status(forCode: "database_unavailable").code == 503)
    }
}
