// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Dispatch
import HeraldCore
import HeraldSQLite
import HeraldTesting
import Testing

/// Registrations arriving together are committed together (group commit); each caller still
/// gets exactly the answer, and the store exactly the state, of registering alone.
@Suite(.heavy) struct GroupCommitContractTests {
    struct Refused: Error {}

    func token(_ n: Int) throws -> DeviceToken {
        let hex = String(n, radix: 16)
        return try DeviceToken(hex: String(repeating: "0", count: 64 - hex.count) + hex)
    }

    @Test("many registrations at once: each answered with its own device, every one stored with its tags", arguments: Driver.enabled)
    func many(driver: Driver) async throws {
        try await driver.withStore { store in
            let devices = try await withThrowingTaskGroup(of: Device.self) { group in
                for n in 1...300 {
                    group.addTask {
                        try await store.register(
                            appID: "demo", DeviceRegistration(token: try self.token(n), userID: "u\(n % 7)", tags: ["t\(n)", "all"]), now: Int64(n))
                    }
                }
                var all: [Device] = []
                for try await device in group { all.append(device) }
                return all
            }
            #expect(devices.count == 300)
            #expect(Set(devices.map(\.id)).count == 300)
            for device in devices {
                let n = Int(device.registration.token, radix: 16) ?? 0
                #expect(device.registration.userID == "u\(n % 7)")
                #expect(device.registration.tags == ["all", "t\(n)"])
                #expect(device.lastRegisteredAt == Int64(n))
            }
            #expect(try await store.devices(appID: "demo", DeviceQuery(tag: "all", limit: 1000)).count == 300)
            #expect(
                try await store.devices(appID: "demo", DeviceQuery(userID: "u3", limit: 1000)).count
                    == devices.filter { $0.registration.userID == "u3" }.count)
            #expect(try await store.device(appID: "demo", token: try self.token(42).hex)?.registration.tags == ["all", "t42"])
        }
    }

    @Test(
        "the same token registered many times at once: one device, holding the user and tags of one whole registration",
        arguments: Driver.enabled
    )
    func sameToken(driver: Driver) async throws {
        try await driver.withStore { store in
            let token = try self.token(1)
            let answers = try await withThrowingTaskGroup(of: Device.self) { group in
                for n in 0..<60 {
                    group.addTask {
                        // Every other one also registers an unrelated token, so groups mix both.
                        if n % 2 == 0 {
                            _ = try await store.register(appID: "demo", DeviceRegistration(token: try self.token(1000 + n)), now: 1)
                        }
                        return try await store.register(appID: "demo", DeviceRegistration(token: token, userID: "u\(n)", tags: ["t\(n)"]), now: 2)
                    }
                }
                var all: [Device] = []
                for try await device in group { all.append(device) }
                return all
            }
            #expect(Set(answers.map(\.id)).count == 1, "one device for one token")
            for answer in answers {
                let n = answer.registration.userID.map { $0.dropFirst() }.flatMap { Int($0) } ?? -1
                #expect(answer.registration.tags == ["t\(n)"], "each answer is one registration, whole")
            }
            let stored = try #require(try await store.device(appID: "demo", token: token.hex))
            let n = stored.registration.userID.map { $0.dropFirst() }.flatMap { Int($0) } ?? -1
            #expect((0..<60).contains(n))
            #expect(stored.registration.tags == ["t\(n)"], "the stored device is one registration, whole")
            #expect(try await store.devices(appID: "demo", DeviceQuery(limit: 1000)).count == 31)
        }
    }

    @Test("invalid registrations among many valid ones fail alone; the valid ones commit", arguments: Driver.enabled)
    func invalidAmongValid(driver: Driver) async throws {
        try await driver.withStore { store in
            let appKey = RegistrationAuthority(mayBindUser: false, protectedTags: ["vip"])
            enum Outcome: Sendable { case stored(Int), refused(Int) }
            let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
                for n in 1...120 {
                    group.addTask {
                        do {
                            switch n {
                            case 40:  // no such app: refused by the database, mid-write
                                _ = try await store.register(appID: "nowhere", DeviceRegistration(token: try self.token(n)), now: 1)
                            case 60:  // the app's key binding a user: refused by the policy
                                _ = try await store.register(
                                    appID: "demo", DeviceRegistration(token: try self.token(n), userID: "mallory"), authority: appKey, now: 1)
                            case 80:  // a protected tag
                                _ = try await store.register(
                                    appID: "demo", DeviceRegistration(token: try self.token(n), tags: ["vip"]), authority: appKey, now: 1)
                            default:
                                _ = try await store.register(
                                    appID: "demo", DeviceRegistration(token: try self.token(n), tags: ["ok"]), authority: appKey, now: 1)
                            }
                            return .stored(n)
                        } catch {
                            return .refused(n)
                        }
                    }
                }
                var all: [Outcome] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            let refused = outcomes.compactMap { if case .refused(let n) = $0 { n } else { nil } }.sorted()
            #expect(refused == [40, 60, 80])
            let stored = try await store.devices(appID: "demo", DeviceQuery(limit: 1000))
            #expect(stored.count == 117)
            #expect(Set(stored.map { Int($0.registration.token, radix: 16) ?? 0 }).isDisjoint(with: [40, 60, 80]))
            #expect(stored.allSatisfy { $0.registration.tags == ["ok"] })
        }
    }

    @Test("SQLite: writes queued behind a busy writer commit as one group; one that throws after writing leaves nothing")
    func sqliteGroup() async throws {
        let directory = try TemporaryDirectory(prefix: "herald-group")
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.path + "/group.sqlite")
        try await database.write { db in try db.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)") }
        // Hold the writer until every grouped write is queued behind it.
        let release = DispatchSemaphore(value: 0)
        let (started, startedSignal) = AsyncStream<Void>.makeStream()
        async let held: Void = database.write { _ in
            startedSignal.yield()
            release.wait()
        }
        for await _ in started { break }
        let outcomes = try await withThrowingTaskGroup(of: (Int, Bool).self) { group in
            for n in 1...50 {
                group.addTask {
                    do {
                        try await database.writeGrouped { db in
                            try db.query("INSERT INTO t (n) VALUES (?)", [.integer(Int64(n))])
                            if n == 25 { throw Refused() }
                            // Each write sees the group's earlier ones: one transaction.
                            return try db.query("SELECT count(*) FROM t").first?.first?.int ?? 0
                        }
                        return (n, true)
                    } catch {
                        return (n, false)
                    }
                }
            }
            // Waiting for an event (every write queued), with a hang guard.
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(60)
            while database.queuedGroupWrites < 50 && clock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
            #expect(database.queuedGroupWrites == 50, "all fifty wait for one group")
            release.signal()
            var all: [Int: Bool] = [:]
            for try await (n, ok) in group { all[n] = ok }
            return all
        }
        try await held
        #expect(outcomes.filter { !$0.value }.map { $0.key } == [25])
        #expect(outcomes.count == 50)
        let rows = try await database.read { db in try db.query("SELECT n FROM t ORDER BY n").compactMap { $0[0].int } }
        #expect(rows == (1...50).filter { $0 != 25 }.map(Int64.init))
    }
}
