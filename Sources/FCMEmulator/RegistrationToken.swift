// SPDX-License-Identifier: Apache-2.0
import APNSModels

/// The two ways a virtual Android device is addressed.
enum TargetKind: String, Sendable, Hashable {
    /// A registration token, `message.token`.
    case token
    /// A Firebase Installation ID, `message.fid`.
    case fid
}

/// Identifiers shaped like FCM's.
enum RegistrationToken {
    static let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    static let infix = ":APA91b"

    /// A Firebase Installation ID: 17 random bytes whose first four bits are `0111`, base64url,
    /// cut to 22 characters, so it starts with c, d, e or f.
    static func makeFID<G: RandomNumberGenerator>(using generator: inout G) -> String {
        var bytes = (0..<17).map { _ in UInt8.random(in: 0...255, using: &generator) }
        bytes[0] = 0x70 | (bytes[0] & 0x0F)
        return String(Base64URL.encode(bytes).prefix(22))
    }

    /// A registration token: an installation id, `:APA91b`, then 134 base64url characters.
    static func makeToken<G: RandomNumberGenerator>(using generator: inout G) -> String {
        let tail = (0..<101).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Self.makeFID(using: &generator) + Self.infix + String(Base64URL.encode(tail).prefix(134))
    }

    static func isFID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 22, let first = bytes.first, (UInt8(ascii: "c")...UInt8(ascii: "f")).contains(first) else { return false }
        return bytes.allSatisfy { Self.alphabet.contains($0) }
    }

    /// Whether `text` looks like a registration token (the shape, not whether one was issued).
    static func isToken(_ text: String) -> Bool {
        guard let range = text.firstRange(of: Self.infix) else { return false }
        let head = text[..<range.lowerBound]
        let tail = text[range.upperBound...]
        return head.utf8.count == 22 && tail.utf8.count >= 100 && tail.utf8.count <= 200
            && head.utf8.allSatisfy { Self.alphabet.contains($0) } && tail.utf8.allSatisfy { Self.alphabet.contains($0) }
    }

    static func isWellFormed(_ text: String, kind: TargetKind) -> Bool {
        kind == .token ? Self.isToken(text) : Self.isFID(text)
    }
}
