// SPDX-License-Identifier: Apache-2.0
package import Testing

/// How many heavy tests run at once: those that start servers, emulators, databases and
/// programs (`.heavy` on their suite).
///
/// Swift Testing starts every test of the run at once. On a two-core machine that put ~450
/// tests, each with its own servers and TLS clients, on two cores together: every one of them
/// crawled, a request that takes milliseconds alone took tens of seconds, and timeouts inside
/// the tests (curl's, a pool's, a client's deadline) fired at random. Admitted a few at a time,
/// each runs near its own pace, and the run as a whole does the same work.
package enum TestAdmission {
    /// At most this many heavy tests (test cases, for parameterized ones) run at once.
    package static let width = 6

    static let slots = AsyncSlots(TestAdmission.width)

    /// Whether the current task runs inside an admitted test already: a nested scope (a suite
    /// and its test both marked) takes no second slot, so it can never wait for itself.
    @TaskLocal static var admitted = false

    /// Runs `body` once a slot is free, holding it until `body` ends.
    package static func run<Result: Sendable>(_ body: () async throws -> Result) async throws -> Result {
        if Self.admitted { return try await body() }
        await Self.slots.acquire()
        defer { Self.slots.release() }
        return try await Self.$admitted.withValue(true) { try await body() }
    }
}

/// Marks a suite (and every test in it) or a test as heavy: it waits for one of
/// ``TestAdmission/width`` slots before it runs.
package struct HeavyTestTrait: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { true }

    package func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // A slot per test case: a suite, or a test as a whole, only holds its cases, which
        // take theirs one by one.
        guard !test.isSuite, testCase != nil else { return try await function() }
        try await TestAdmission.run(function)
    }
}

extension Trait where Self == HeavyTestTrait {
    /// Starts servers, emulators, databases or programs: runs with few others at once (see ``TestAdmission``).
    package static var heavy: Self { HeavyTestTrait() }
}
