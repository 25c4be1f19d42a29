// SPDX-License-Identifier: Apache-2.0
import Foundation
import HeraldKit

extension DeviceCommand {
    /// Receipts, as an app with HeraldKit reports them: "received" for every push that carries a
    /// receipt id (through the service extension for the mutable-content alerts it handles,
    /// here for the others), and "opened" for a notification opened (`--open`) or an action
    /// tapped (`--tap`). Sent at once; one whose delivery Herald has not recorded yet is sent
    /// again with back-off (for up to 30 s). Prints `  ↳ receipts: …`.
    func report(_ payload: Data, pushType: String, client: HeraldClient, categories: [String: [String]]) async {
        guard self.receipts || self.open || self.tap != nil, let received = try? ReceivedNotification(jsonData: payload),
            HeraldClient.receiptID(in: received.payload) != nil
        else { return }
        let alert = pushType == "alert" && (received.alert != nil || received.badge != nil || received.sound != nil)
        let shown = alert && (self.authorization == .authorized || self.authorization == .provisional)
        var events: [String] = []
        if self.receipts {
            // The extension ran for a shown mutable-content alert and reported it already.
            if !(shown && received.mutableContent) { client.reportReceived(payload: received.payload) }
            events.append("received")
        }
        let tapped = self.tap.flatMap { tap in categories[received.category ?? ""]?.contains(tap) == true ? tap : nil }
        if shown, self.open || tapped != nil {
            client.reportOpened(payload: received.payload, action: tapped)
            events.append("opened" + (tapped.map { " (\($0))" } ?? ""))
        }
        guard !events.isEmpty else { return }
        do {
            let flush = try await client.flushReceipts(patience: 30)
            say("  ↳ receipts: \(events.joined(separator: ", ")) — \(flush.queued == 0 ? "reported" : "\(flush.queued) still queued")")
        } catch {
            say("  ↳ receipts: not reported: \(error)")
        }
    }
}
