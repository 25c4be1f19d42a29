// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore

/// Not API: the fuzzer's entry into the client's HTTP/2 frame reader and connection state
/// machine (`FuzzTesting/`, which builds outside this package and so cannot see `package`
/// symbols). Nothing else may use it; it can change or go away in any release.
public enum _APNSClientFuzzing {
    /// Feeds `bytes` to a fresh connection as what APNs sent, in two reads, submitting requests
    /// whenever the connection has capacity (as the pool does), and checks that every request is
    /// handed back exactly once. Traps on a broken invariant.
    public static func run(_ bytes: UnsafeRawBufferPointer) {
        let allocator = ByteBufferAllocator()
        var machine = APNSConnection.StateMachine(usesToken: false, allocator: allocator)
        var reader = HTTP2FrameReader()
        machine.channelActive()
        _ = machine.takeOutbound()
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let request = Self.request
        var submitted = 0
        var handedBack = 0
        var frames = 0

        func handBack(_ action: APNSConnection.StateMachine.FrameAction) {
            switch action {
            case .none, .ready, .connectionError: break
            case .succeeded, .failed, .tokenExpired, .refused: handedBack += 1
            case .goAway(let goAway): handedBack += goAway.unprocessed.count
            }
        }

        let split = bytes.count / 2
        for chunk in [bytes[..<split], bytes[split...]] {
            var incoming = allocator.buffer(bytes: chunk)
            reader.append(&incoming)
            while machine.state != .closed {
                let action: APNSConnection.StateMachine.FrameAction
                do {
                    guard let frame = try reader.next() else { break }
                    action = machine.frameReceived(frame)
                } catch {
                    action = machine.readFailed(error)
                }
                handBack(action)
                frames += 1
                // The pool's part: fill free streams, now and then let deadlines pass.
                var budget = 4
                while machine.capacity > 0, budget > 0, submitted < 64 {
                    budget -= 1
                    let pending = Pending(
                        request: request, completion: .callback { _, _ in }, submitted: start,
                        deadline: start + .seconds(Int64(1 + submitted % 7))
                    )
                    switch machine.submit(pending, authority: "api.push.apple.com", usesToken: false, sharedToken: nil) {
                    case .sent: submitted += 1
                    case .notSent: break
                    }
                }
                if frames % 16 == 0 { handedBack += machine.expire(now: start + .seconds(Int64(frames / 16))).count }
                precondition(machine.capacity >= 0 && machine.inFlight == submitted - handedBack, "streams lost or handed back twice")
            }
            machine.readComplete()
            reader.compact()
            _ = machine.takeOutbound()
        }
        if let termination = machine.closed() {
            handedBack += termination.outcomes.count + termination.unanswered.count
        }
        precondition(machine.closed() == nil, "a connection ends once")
        precondition(handedBack == submitted, "\(submitted) requests submitted, \(handedBack) handed back")
    }

    private static let request = APNSRequest(
        deviceToken: try! DeviceToken(hex: String(repeating: "ab", count: 32)),
        headers: NotificationHeaders(pushType: .alert, topic: "com.example.app"),
        payload: Array(#"{"aps":{"alert":"fuzz"}}"#.utf8)
    )
}
