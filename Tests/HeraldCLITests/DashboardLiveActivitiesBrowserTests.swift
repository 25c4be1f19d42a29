// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldTesting
import Testing

extension DashboardBrowserTests {
    @Test(
        "Live Activities: a start refused with its code, one started by push-to-start for a user's virtual device, listed, updated and ended after a confirmation; the emulator received the start, the update and the end",
        .enabled(if: available || required, Comment(rawValue: skipMessage))
    )
    func liveActivitiesInBrowser() async throws {
        try await self.walkOnEmulator(
            prefix: "herald-live-activities", script: "live_activities_test.py", passed: "dashboard live activities passed")
    }
}
