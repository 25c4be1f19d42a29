// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// The control API as Swift, for in-process tests.
extension WebPushEmulator {
    /// Why a virtual browser cannot be made.
    package struct BrowserError: Error, CustomStringConvertible, Sendable {
        package var description: String
    }

    /// A virtual browser subscribed with `personality`'s push service: the emulator holds its
    /// P-256 key pair and auth secret and decrypts every message it accepts for it. Apple and
    /// FCM subscriptions need an `applicationServerKey` (65 octets, uncompressed P-256); a
    /// Mozilla one without it is unrestricted (`/wpush/v1/`). Call after ``start()``: the
    /// endpoint carries the bound port.
    package func makeBrowser(personality: WebPushPersonality, applicationServerKey: [UInt8]?) throws -> WebPushBrowserSubscription {
        if let key = applicationServerKey {
            guard ControlAPI.applicationServerKey(Base64URL.encode(key)) != nil else {
                throw BrowserError(description: "applicationServerKey must be a 65-octet uncompressed P-256 point")
            }
        } else if personality != .mozilla {
            throw BrowserError(description: "a \(personality.rawValue) subscription needs an applicationServerKey")
        }
        return self.state.makeBrowser(personality: personality, applicationServerKey: applicationServerKey, origin: self.origin)
    }

    /// What the browser holds; `nil` for an unknown id.
    package func inbox(_ id: String) -> WebPushInbox? {
        self.state.inbox(id)
    }

    /// Off line, accepted messages wait up to their TTL (TTL 0 is dropped, a same-`Topic`
    /// message replaces a waiting one); back on line, what waited is delivered in order.
    /// Returns `false` for an unknown id.
    @discardableResult
    package func setOnline(_ id: String, _ online: Bool) -> Bool {
        self.state.setOnline(id, online, now: self.clock.nowMilliseconds)
    }

    /// The browser unsubscribes: its endpoint answers 410 from now on.
    @discardableResult
    package func unsubscribe(_ id: String) -> Bool {
        self.state.unsubscribe(id)
    }

    /// Queues `count` copies of `fault` for the next push requests, one each.
    package func inject(fault: WebPushFault, count: Int = 1) {
        self.state.inject(Array(repeating: fault, count: max(0, count)))
    }

    package func clearFaults() {
        self.state.clearFaults()
    }

    package var counters: WebPushCounters { self.state.counters }

    /// Forgets virtual browsers, faults, counters and Firefox's message records (Firefox's
    /// sockets and registrations stay).
    package func reset() {
        self.state.reset()
    }

    /// The channels Firefox registered over the WebSocket, with the ack of each message.
    package var firefoxChannels: [FirefoxChannelRecord] { self.state.firefoxChannels() }

    /// Events from now on (arrivals, refusals, Firefox's hellos, registrations and acks); the
    /// stream ends when the emulator shuts down.
    package func events() -> AsyncStream<WebPushEvent> {
        self.state.subscribe().stream
    }
}
