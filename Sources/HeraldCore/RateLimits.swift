// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation

/// The rate limits on registration and sending: a token bucket per API key and one per client
/// address, each sized by the scope of the key the request carries. The register key ships inside
/// every copy of the app, so anyone holding the app binary has it: its per-key limit is the whole
/// app's registration rate, and the per-address limit is what bounds one attacker.
package struct RateLimits: Sendable, Equatable {
    /// Which routes are limited.
    package enum Operation: String, Sendable, CaseIterable {
        /// `PUT` and `DELETE /v1/apps/{app}/devices/{token}`.
        case register
        /// `POST /v1/apps/{app}/notifications`.
        case send
        /// `POST /v1/apps/{app}/receipts`: limited like registration (the register key, per key
        /// and per address) but in buckets of its own, so a flood of receipts cannot spend the
        /// app's or an address's registrations, nor the other way round.
        case receipt

        /// The scope a key needs for it.
        package var scope: APIScope { self == .send ? .send : .register }
    }

    /// Which bucket refused.
    package enum Kind: String, Sendable, CaseIterable {
        case key
        case address
        /// The app's own limit (``AppRateLimits``).
        case app
    }

    /// Per key, by the key's scope; a scope without an entry is not limited per key.
    package var perKey: [APIScope: TokenBucket.Limit] = [
        // Every install of the app shares the register key: this is the whole app's rate.
        .register: TokenBucket.Limit(capacity: 100_000, perSecond: 20_000),
        // The backend and the team: a bound on a runaway loop, far above what one server serves.
        .send: TokenBucket.Limit(capacity: 100_000, perSecond: 20_000),
        .admin: TokenBucket.Limit(capacity: 100_000, perSecond: 20_000),
    ]
    /// Per client address, by the scope of the key it uses; a scope without an entry is not
    /// limited per address. Backends (send and admin keys) often sit behind one NAT address.
    package var perAddress: [APIScope: TokenBucket.Limit] = [
        // A phone registers on launch and when its token changes: a burst of 60, then one a second.
        .register: TokenBucket.Limit(capacity: 60, perSecond: 1)
    ]
    /// Failed authentications per client address (unknown, wrong, revoked or expired keys, refused
    /// dashboard sign-ins), whatever the scope: past it the address is answered 429 before its
    /// key is looked up (``AuthenticationFailures``). Nil: not counted.
    package var failedAuthentication: TokenBucket.Limit? = AuthenticationFailures.defaultLimit
    /// Peers (addresses or CIDR ranges, IPv4 or IPv6; an IPv4-mapped IPv6 address is its IPv4
    /// address) whose `X-Forwarded-For` is believed: a request from one of them is counted against
    /// the rightmost forwarded address that is not itself a trusted proxy. Empty (the default):
    /// the header is ignored and the TCP peer is the client.
    package var trustedProxies: [IPRange] = []
    /// An IPv6 client is counted by its /64 and, with this many times the /64's limit, by its
    /// /48: one holder of a /48 (65,536 /64s) cannot drain the key's bucket through them.
    package var ipv6SiteMultiple: Double = 16
    /// Buckets one process keeps in memory at most (each ~100 bytes): past it, a new bucket
    /// forgets an idle one (full: what a new one would be) among the next few in order, else the
    /// first of those that is pinned by neither a key nor a lease in flight (``BoundedTable``).
    package var maxBuckets = 100_000
    /// On PostgreSQL: tokens a process takes from the shared bucket at once, at most (each bucket
    /// leases a tenth of its capacity, 1 to this).
    package var maxLease = 20
    /// On PostgreSQL: leased tokens not used within this many milliseconds are dropped.
    package var leaseLifetimeMilliseconds: Int64 = 1000

    package init() {}

    /// No limit at all.
    package static let off: RateLimits = {
        var limits = RateLimits()
        limits.perKey = [:]
        limits.perAddress = [:]
        limits.failedAuthentication = nil
        return limits
    }()

    package var isOff: Bool { self.perKey.isEmpty && self.perAddress.isEmpty && self.failedAuthentication == nil }

    /// A bucket a request must take a token from.
    package struct Bucket: Sendable, Equatable {
        /// Names the bucket among all processes: the key's id, or a hash of the scope and the
        /// address (addresses are not written to the database).
        package var id: String
        package var limit: TokenBucket.Limit
        package var kind: Kind

        package init(id: String, limit: TokenBucket.Limit, kind: Kind) {
            self.id = id
            self.limit = limit
            self.kind = kind
        }
    }

    /// The buckets a request with a key of `scope` (id `keyID`) from `address` takes a token from,
    /// in order: the address's first (for an IPv6 /64, its /48's next), so that a client over its
    /// own limit does not also drain the key's (for a register key, the whole app's), then the
    /// key's. Receipts have buckets of their own (ids prefixed `r`).
    package func buckets(
        _ operation: Operation = .register, scope: APIScope, keyID: String, address: String?, app: (id: String, limits: AppRateLimits)? = nil
    ) -> [Bucket] {
        var buckets: [Bucket] = []
        let lane = operation == .receipt ? "r" : ""
        // An app may set its register key's per-address limit itself: a bucket of that app's.
        // It only tightens the server's: an app's own admin key may set it.
        let own = scope == .register && operation != .send ? app.flatMap { app in app.limits.registerPerAddress.map { (app.id, $0) } } : nil
        if let limit = Self.tighter(own?.1, self.perAddress[scope]), let address {
            let name = scope.rawValue + " " + address + (own.map { " " + $0.0 } ?? "")
            buckets.append(Bucket(id: lane + "a:" + Self.digest(name), limit: limit, kind: .address))
            if let site = Self.site(address) {
                let wider = TokenBucket.Limit(capacity: limit.capacity * self.ipv6SiteMultiple, perSecond: limit.perSecond * self.ipv6SiteMultiple)
                buckets.append(Bucket(id: lane + "a:" + Self.digest(scope.rawValue + " " + site), limit: wider, kind: .address))
            }
        }
        if let limit = self.perKey[scope] { buckets.append(Bucket(id: lane + "k:" + keyID, limit: limit, kind: .key)) }
        // The app's own rate, across its keys and addresses, last: what a client over its own
        // limit was refused does not spend the app's.
        if let app, let limit = app.limits.limit(operation) {
            buckets.append(Bucket(id: "p:" + operation.rawValue + ":" + app.id, limit: limit, kind: .app))
        }
        return buckets
    }

    /// The tighter of two limits (the smaller burst and the slower rate); either when the other is nil.
    static func tighter(_ a: TokenBucket.Limit?, _ b: TokenBucket.Limit?) -> TokenBucket.Limit? {
        guard let a, let b else { return a ?? b }
        return TokenBucket.Limit(capacity: min(a.capacity, b.capacity), perSecond: min(a.perSecond, b.perSecond))
    }

    /// The /48 of a /64 as ``prefix(_:)`` names it (`2001:db8:1:2::/64` → `2001:db8:1::/48`); nil
    /// for an IPv4 address.
    package static func site(_ prefix: String) -> String? {
        guard prefix.hasSuffix("::/64") else { return nil }
        return prefix.dropLast(5).split(separator: ":", omittingEmptySubsequences: false).prefix(3).joined(separator: ":") + "::/48"
    }

    private static func digest(_ text: String) -> String {
        APIKeySecret.hex(Array(SHA256.hash(data: Array(text.utf8)).prefix(16)))
    }

    /// The tokens one process leases at once from a shared bucket of `limit`.
    package func leaseSize(_ limit: TokenBucket.Limit) -> Int {
        max(1, min(self.maxLease, Int(limit.capacity / 10)))
    }

    /// The client a request counts against: the TCP peer, or, when the peer is a trusted proxy,
    /// the rightmost `X-Forwarded-For` entry that is not one (a client can prepend anything to
    /// the header, but not what the proxies append after it). IPv6 clients count by their /64,
    /// which one subscriber usually holds whole.
    package func clientAddress(peer: String?, forwardedFor: [String]) -> String? {
        guard let peer else { return nil }
        guard self.isTrustedProxy(peer) else { return Self.prefix(peer) }
        let hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { Self.host($0.trimmingCharacters(in: .whitespaces)) }
        for hop in hops.reversed() where !self.isTrustedProxy(hop) {
            // Not an address (empty, a name, garbage): the proxy's own address counts.
            return IPRange.address(hop) == nil ? Self.prefix(peer) : Self.prefix(hop)
        }
        return Self.prefix(peer)
    }

    /// A forwarded hop without its port, as some proxies write it (`203.0.113.5:443`,
    /// `[2001:db8::1]:443`): otherwise each source port would be a client of its own.
    static func host(_ hop: String) -> String {
        if hop.hasPrefix("["), let close = hop.firstIndex(of: "]") { return String(hop[hop.index(after: hop.startIndex)..<close]) }
        let colons = hop.utf8.filter { $0 == UInt8(ascii: ":") }.count
        if colons == 1, let colon = hop.firstIndex(of: ":") { return String(hop[..<colon]) }
        return hop
    }

    /// Whether `address` lies in one of ``trustedProxies`` (never, with none: no address is parsed).
    package func isTrustedProxy(_ address: String) -> Bool {
        guard !self.trustedProxies.isEmpty, let parsed = IPRange.address(address) else { return false }
        return self.trustedProxies.contains { $0.contains(parsed) }
    }

    /// An IPv6 address's first four groups (its /64); an IPv4 address (or one mapped into
    /// IPv6) as it is.
    package static func prefix(_ address: String) -> String {
        // Byte by byte: `contains` with a string argument is Foundation's search, per request.
        guard address.utf8.contains(UInt8(ascii: ":")) else { return address }
        let lower = address.lowercased()
        if lower.hasPrefix("::ffff:"), lower.dropFirst(7).contains(".") { return String(lower.dropFirst(7)) }
        let halves = lower.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let head = halves[0].isEmpty ? [] : halves[0].split(separator: ":").map(String.init)
        let tail = halves.count > 1 && !halves[1].isEmpty ? halves[1].split(separator: ":").map(String.init) : []
        let groups = halves.count > 1 ? head + Array(repeating: "0", count: max(0, 8 - head.count - tail.count)) + tail : head
        return groups.prefix(4).map { group in
            let trimmed = group.drop { $0 == "0" }
            return trimmed.isEmpty ? "0" : String(trimmed)
        }.joined(separator: ":") + "::/64"
    }
}

/// An app's own rate limits, over the server's (``RateLimits``): each a bucket of the app's
/// alone, whatever the key or address (the app's whole registration, receipt or send rate), and
/// the per-address limit of its register key's registrations, tightening the server's. Set with
/// `PATCH /v1/apps/{app} {"rateLimits": …}` or the dashboard; nil fields: the server's alone.
package struct AppRateLimits: Sendable, Hashable, CustomStringConvertible {
    package var register: TokenBucket.Limit?
    package var registerPerAddress: TokenBucket.Limit?
    package var receipt: TokenBucket.Limit?
    package var send: TokenBucket.Limit?

    package init(
        register: TokenBucket.Limit? = nil, registerPerAddress: TokenBucket.Limit? = nil, receipt: TokenBucket.Limit? = nil,
        send: TokenBucket.Limit? = nil
    ) {
        self.register = register
        self.registerPerAddress = registerPerAddress
        self.receipt = receipt
        self.send = send
    }

    package static let fields = ["register", "registerPerAddress", "receipt", "send"]

    package var isEmpty: Bool { self == AppRateLimits() }

    package subscript(field: String) -> TokenBucket.Limit? {
        get {
            switch field {
            case "register": self.register
            case "registerPerAddress": self.registerPerAddress
            case "receipt": self.receipt
            case "send": self.send
            default: nil
            }
        }
        set {
            switch field {
            case "register": self.register = newValue
            case "registerPerAddress": self.registerPerAddress = newValue
            case "receipt": self.receipt = newValue
            case "send": self.send = newValue
            default: break
            }
        }
    }

    /// The app's own limit on `operation`, if it has one.
    package func limit(_ operation: RateLimits.Operation) -> TokenBucket.Limit? {
        switch operation {
        case .register: self.register
        case .receipt: self.receipt
        case .send: self.send
        }
    }

    /// The stored form: `register=100/10;send=1000/100` (only the fields set).
    package var description: String {
        Self.fields.compactMap { field in self[field].map { "\(field)=\($0)" } }.joined(separator: ";")
    }

    /// The stored form read back; nil for text that is not one.
    package init?(stored text: String) {
        self.init()
        for part in text.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, Self.fields.contains(pair[0]), let limit = TokenBucket.Limit(parsing: pair[1]) else { return nil }
            self[pair[0]] = limit
        }
    }
}
