// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import Foundation
import HeraldCore
import HeraldKit
import HeraldServer
import HeraldTesting
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Delivery confirmed on the device, through real sockets: Herald → APNs (the emulator) → the
/// virtual device (`herald device`, reporting through HeraldKit) → `POST /receipts` → the
/// notification's funnel, a webhook and the SSE stream; then forged and replayed receipts.
@Suite(.heavy) struct ReceiptsEndToEndTests {
    static func withServer(_ body: @escaping @Sendable (RunningServer) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "herald-receipts")
        defer { directory.remove() }
        var configuration = HeraldClientTests.configuration(directory)
        configuration.webhookAllowInternal = true
        configuration.refuseUndeclaredStatuses = true
        try await withHeraldServer(configuration: configuration) { server in try await body(server) }
    }

    /// A webhook receiver: prints each POSTed body on one line.
    static func receiver() async throws -> (BackgroundProcess, String) {
        let script = """
            import http.server, sys
            class H(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    body = self.rfile.read(int(self.headers["content-length"]))
                    print(body.decode(), flush=True)
                    self.send_response(204); self.end_headers()
                def log_message(self, *args): pass
            s = http.server.HTTPServer(("127.0.0.1", 0), H)
            print("receiver listening", s.server_address[1], flush=True)
            s.serve_forever()
            """
        let process = try BackgroundProcess("/usr/bin/env", ["python3", "-c", script])
        let port = try await process.line(startingWith: "receiver listening ")
        return (process, "http://127.0.0.1:\(try #require(port, "\(process.printed)"))/hook")
    }

    static func call(_ base: URL, _ key: String, _ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: try #require(URL(string: base.absoluteString + path)))
        request.httpMethod = method
        request.setValue("Bearer \(key)", forHTTPHeaderField: "authorization")
        request.httpBody = body.map { Data($0.utf8) }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:])
    }

    static func funnel(_ base: URL, _ key: String, _ id: String) async throws -> [String: Int] {
        try await Self.call(base, key, "GET", "/v1/apps/demo/notifications/\(id)").1["funnel"] as? [String: Int] ?? [:]
    }

    @Test("a virtual device's receipt and open reach the funnel, a webhook and SSE; forged and replayed receipts change nothing")
    func deviceReports() async throws {
        try await Self.withServer { server in
            let base = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let control = "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"
            let admin = try #require(server.initialAdminKey)
            _ = try await Self.call(base, admin, "POST", "/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#)
            _ = try await Self.call(base, admin, "POST", "/v1/apps", #"{"id":"other","bundleId":"com.example.other"}"#)
            let registerKey = try #require(
                try await Self.call(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"demo"}"#).1["key"] as? String)
            let otherKey = try #require(
                try await Self.call(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"other"}"#).1["key"] as? String)
            let (receiver, hookURL) = try await Self.receiver()
            let hook = try await Self.call(
                base, admin, "POST", "/v1/apps/demo/webhooks", #"{"url":"\#(hookURL)","events":["delivery.received","delivery.opened"]}"#)
            #expect(hook.0 == 201, "\(hook.1)")
            let stream = try BackgroundProcess(
                "curl",
                ["-sN", "-H", "authorization: Bearer \(admin)", base.absoluteString + "/v1/apps/demo/events?types=delivery.received,delivery.opened"])
            try #require(try await stream.waitFor("herald delivery events", timeout: 300), "\(stream.printed)")

            // The phone: registers through HeraldKit, opens what it shows, reports through HeraldKit.
            let device = try BackgroundProcess(
                BackgroundProcess.heraldExecutable,
                ["device", "--server", base.absoluteString, "--control", control, "--app", "demo", "--key", registerKey, "--open", "--count", "1"])
            try #require(try await device.waitFor("listening for notifications", timeout: 300), "\(device.printed)")
            let sent = try await Self.call(base, admin, "POST", "/v1/apps/demo/notifications", #"{"audience":"all","title":"Hi","body":"there"}"#)
            let id = try #require(sent.1["id"] as? String, "\(sent)")
            try #require(try await device.waitFor("↳ receipts:", timeout: 300), "\(device.printed)")
            #expect(device.printed.contains("↳ receipts: received, opened — reported"), "\(device.printed)")

            // The funnel, the delivery's times, the webhook and the stream.
            #expect(try await Self.funnel(base, admin, id) == ["sent": 1, "received": 1, "opened": 1])
            let detail = try await Self.call(base, admin, "GET", "/v1/apps/demo/notifications/\(id)").1
            let delivery = try #require((detail["deliveries"] as? [[String: Any]])?.first)
            #expect(delivery["receivedAt"] is Int && delivery["openedAt"] is Int, "\(delivery)")
            try #require(try await receiver.waitFor("delivery.opened", timeout: 300), "\(receiver.printed)")
            #expect(receiver.printed.contains("delivery.received"), "\(receiver.printed)")
            try #require(try await stream.waitFor("event: delivery.opened", timeout: 300), "\(stream.printed)")
            #expect(stream.printed.contains("event: delivery.received"), "\(stream.printed)")
            _ = try await stream.stop(signal: SIGKILL)

            // What the emulator handed the phone: the receipt id, beside aps.
            let token = try #require(
                (try await Self.call(base, admin, "GET", "/v1/apps/demo/devices").1["devices"] as? [[String: Any]])?.first?["token"] as? String)
            let controlURL = try #require(URL(string: control))
            let inbox = try await Self.call(controlURL, "", "GET", "/v1/devices/\(token)/inbox").1
            let payload = try #require((inbox["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any])
            let receipt = try #require(payload["hr"] as? String)
            #expect(payload["aps"] != nil)

            // A replay: accepted as a duplicate, nothing moves.
            let replay = try await Self.call(
                base, registerKey, "POST", "/v1/apps/demo/receipts",
                #"{"receipts":[{"receipt":"\#(receipt)","event":"received"},{"receipt":"\#(receipt)","event":"opened","action":"X"}]}"#)
            #expect(replay.0 == 200 && replay.1["applied"] as? Int == 0 && replay.1["duplicates"] as? Int == 2, "\(replay)")
            // Forged: one character changed, made up, another app's path and key with demo's receipt.
            var forged = Array(receipt)
            forged[20] = forged[20] == "A" ? "B" : "A"
            let refused = try await Self.call(
                base, registerKey, "POST", "/v1/apps/demo/receipts",
                #"{"receipts":[{"receipt":"\#(String(forged))","event":"opened"},{"receipt":"AAAAAAAAAAAAAAAAAAAAAAAAAAA","event":"received"},{"receipt":"\#(receipt)","event":"clicked"}]}"#
            )
            #expect(refused.0 == 200 && refused.1["applied"] as? Int == 0, "\(refused)")
            let codes = (refused.1["refused"] as? [[String: Any]])?.compactMap { $0["code"] as? String }
            #expect(codes == ["receipt_invalid", "receipt_invalid", "bad_event"], "\(refused)")
            let stranger = try await Self.call(
                base, otherKey, "POST", "/v1/apps/other/receipts", #"{"receipts":[{"receipt":"\#(receipt)","event":"opened"}]}"#)
            #expect((stranger.1["refused"] as? [[String: Any]])?.first?["code"] as? String == "receipt_invalid", "\(stranger)")
            let crossed = try await Self.call(
                base, otherKey, "POST", "/v1/apps/demo/receipts", #"{"receipts":[{"receipt":"\#(receipt)","event":"opened"}]}"#)
            #expect(crossed.0 == 403, "another app's register key")
            // Malformed: 400 with a stable code, nothing written.
            let malformed = try await Self.call(base, registerKey, "POST", "/v1/apps/demo/receipts", #"{"receipts":[{"receipt":1}]}"#)
            #expect(malformed.0 == 400, "\(malformed)")
            let empty = try await Self.call(base, registerKey, "POST", "/v1/apps/demo/receipts", #"{"receipts":[]}"#)
            #expect(empty.0 == 400 && (empty.1["error"] as? [String: Any])?["code"] as? String == "bad_receipts", "\(empty)")
            #expect(try await Self.funnel(base, admin, id) == ["sent": 1, "received": 1, "opened": 1], "nothing moved")

            // The switch: off, pushes carry no id and reports are refused.
            let off = try await Self.call(base, admin, "PATCH", "/v1/apps/demo", #"{"receipts":false}"#)
            #expect(off.0 == 200 && off.1["receipts"] as? Bool == false)
            let disabled = try await Self.call(
                base, registerKey, "POST", "/v1/apps/demo/receipts", #"{"receipts":[{"receipt":"\#(receipt)","event":"opened"}]}"#)
            #expect(disabled.0 == 403 && (disabled.1["error"] as? [String: Any])?["code"] as? String == "receipts_disabled", "\(disabled)")
            // The id's 35 bytes count at acceptance: a payload of 4,080 bytes fits only without it.
            let near = #"{"audience":"all","title":"x","data":{"pad":"\#(String(repeating: "p", count: 4080 - 40))"}}"#
            #expect(try await Self.call(base, admin, "POST", "/v1/apps/demo/notifications", near).0 == 202, "receipts off")
            _ = try await Self.call(base, admin, "PATCH", "/v1/apps/demo", #"{"receipts":true}"#)
            let tooLarge = try await Self.call(base, admin, "POST", "/v1/apps/demo/notifications", near)
            #expect(tooLarge.0 == 422 && (tooLarge.1["error"] as? [String: Any])?["code"] as? String == "payload_too_large", "\(tooLarge)")
            _ = try await device.stop(signal: SIGKILL)
            _ = try await receiver.stop(signal: SIGKILL)
        }
    }
}

extension ReceiptsEndToEndTests {
    @Test("reports queued while Herald cannot be reached stay in the queue file, and a later client sends them")
    func offlineQueue() async throws {
        try await Self.withServer { server in
            let base = try #require(URL(string: "http://127.0.0.1:\(server.port)"))
            let controlURL = try #require(URL(string: "http://127.0.0.1:\(server.emulator?.controlPort ?? 0)"))
            let admin = try #require(server.initialAdminKey)
            _ = try await Self.call(base, admin, "POST", "/v1/apps", #"{"id":"demo","bundleId":"com.example.app"}"#)
            let registerKey = try #require(
                try await Self.call(base, admin, "POST", "/v1/keys", #"{"scope":"register","appId":"demo"}"#).1["key"] as? String)
            let token = try #require(
                try await Self.call(controlURL, "", "POST", "/v1/devices", #"{"bundleId":"com.example.app","environment":"development"}"#).1["token"]
                    as? String)
            let online = HeraldClient(serverURL: base, appID: "demo", registerKey: registerKey, persistence: .memoryOnly)
            try await online.register(.device(try #require(PushToken.data(hex: token))), DeviceDetails(environment: .sandbox))
            let id = try #require(
                try await Self.call(base, admin, "POST", "/v1/apps/demo/notifications", #"{"audience":"all","title":"Hi"}"#).1["id"] as? String)
            var payload: [String: Any]?
            let deadline = ContinuousClock.now + .seconds(300)  // a hang guard: the loop ends once it arrived
            while payload == nil, ContinuousClock.now < deadline {
                let inbox = try await Self.call(controlURL, "", "GET", "/v1/devices/\(token)/inbox").1
                payload = (inbox["notifications"] as? [[String: Any]])?.first?["payload"] as? [String: Any]
                if payload == nil { try await Task.sleep(for: .milliseconds(25)) }
            }
            let userInfo: [AnyHashable: Any] = try #require(payload).reduce(into: [:]) { $0[$1.key] = $1.value }

            // Offline: nothing listens at this address; the reports stay queued, in the file.
            let directory = try TemporaryDirectory(prefix: "herald-receipt-queue")
            defer { directory.remove() }
            let file = URL(fileURLWithPath: directory.path + "/receipts.json")
            let dead = try #require(URL(string: "http://127.0.0.1:9"))
            let offline = HeraldClient(serverURL: dead, appID: "demo", registerKey: registerKey, persistence: .memoryOnly, receiptQueueFile: file)
            #expect(offline.reportReceived(userInfo) && offline.reportOpened(userInfo, action: "REPLY"))
            #expect(offline.reportReceived(userInfo), "a repeat while queued is queued once")
            let flushed = try await offline.flushReceipts()
            #expect(flushed.queued == 2 && flushed.applied == 0, "\(flushed)")
            #expect(!offline.reportReceived(["aps": ["alert": "no receipt id"]]))

            // A relaunch, online, with the same file: it sends them.
            let relaunched = HeraldClient(serverURL: base, appID: "demo", registerKey: registerKey, persistence: .memoryOnly, receiptQueueFile: file)
            #expect(relaunched.queuedReceipts == 2)
            let sent = try await relaunched.flushReceipts(patience: 300)
            #expect(sent.applied == 2 && sent.queued == 0, "\(sent)")
            #expect(try await Self.funnel(base, admin, id) == ["sent": 1, "received": 1, "opened": 1])
            let detail = try await Self.call(base, admin, "GET", "/v1/apps/demo/notifications/\(id)").1
            #expect((detail["deliveries"] as? [[String: Any]])?.first?["action"] as? String == "REPLY")
        }
    }
}
