// SPDX-License-Identifier: Apache-2.0
import APNSModels
import Synchronization
import Testing

final class ManualEpochClock: EpochClock {
    private let milliseconds: Mutex<Int64>
    init(seconds: Int64) { self.milliseconds = Mutex(seconds * 1000) }
    var nowMilliseconds: Int64 { self.milliseconds.withLock { $0 } }
    func advance(seconds: Int64) { self.milliseconds.withLock { $0 += seconds * 1000 } }
}

@Suite struct ProviderTokenSourceTests {
    let key = SigningKey.generate(keyID: "ABC123DEFG", teamID: "TEAM123456")

    @Test("one token is shared until it is 50 minutes old, then replaced")
    func refreshAfterFiftyMinutes() throws {
        let clock = ManualEpochClock(seconds: 1_800_000_000)
        let source = ProviderTokenSource(key: self.key, clock: clock)
        let first = try source.current()
        #expect(first.issuedAt == 1_800_000_000)
        #expect(first.authorization.hasPrefix("bearer "))
        clock.advance(seconds: 49 * 60 + 59)
        #expect(try source.current() == first)
        clock.advance(seconds: 1)
        let second = try source.current()
        #expect(second != first)
        #expect(second.issuedAt == 1_800_000_000 + 50 * 60)
        #expect(second.generation == first.generation + 1)
        let claims = try ProviderTokenClaims(token: String(second.authorization.dropFirst(7)))
        #expect(claims.isSigned(by: self.key.publicKey))
        #expect(claims.issuedAt == second.issuedAt)
    }

    @Test("many concurrent readers get one signed token")
    func concurrentReaders() async throws {
        let source = ProviderTokenSource(key: self.key, clock: ManualEpochClock(seconds: 1_800_000_000))
        let tokens = try await withThrowingTaskGroup(of: ProviderToken.self) { group in
            for _ in 0..<200 { group.addTask { try source.current() } }
            return try await group.reduce(into: Set<ProviderToken>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
    }

    @Test("after ExpiredProviderToken the rejected token is replaced once, however many connections report it")
    func refreshReplacing() throws {
        let clock = ManualEpochClock(seconds: 1_800_000_000)
        let source = ProviderTokenSource(key: self.key, clock: clock)
        let rejected = try source.current()
        clock.advance(seconds: 30)
        let replacement = try source.refresh(replacing: rejected)
        #expect(replacement != rejected)
        #expect(try source.refresh(replacing: rejected) == replacement)
        #expect(try source.current() == replacement)
    }

    @Test("a clock that moved backwards does not keep a token from the future")
    func clockMovedBack() throws {
        let clock = ManualEpochClock(seconds: 1_800_000_000)
        let source = ProviderTokenSource(key: self.key, clock: clock)
        let first = try source.current()
        clock.advance(seconds: -3600)
        #expect(try source.current() != first)
    }

    @Test("the refresh interval stays within APNs's 20-minute and one-hour bounds")
    func bounds() {
        #expect(ProviderTokenSource(key: self.key, refreshAfterSeconds: 60).refreshAfterSeconds == 20 * 60)
        #expect(ProviderTokenSource(key: self.key, refreshAfterSeconds: 7200).refreshAfterSeconds == 59 * 60)
    }
}
