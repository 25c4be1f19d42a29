// SPDX-License-Identifier: Apache-2.0
import APNSModels
import NIOCore

@testable import APNSClient

/// One client connection on plain values: bytes from "APNs" go through ``HTTP2FrameReader``
/// into ``APNSConnection/StateMachine``; what it writes comes back as ``WireFrame``s.
struct ClientConnectionHarness {
    /// What the state machine asked for, with requests named by their `tag`.
    enum Seen: Equatable {
        case succeeded(tag: Int, apnsID: String?)
        case failed(tag: Int, code: APNSClientError.Code, status: Int?)
        case tokenExpired(tag: Int)
        case refused(tag: Int)
        case ready(maxStreams: Int)
        case goAway(unprocessed: [Int], failedBeforeReady: Bool, code: UInt32)
        case connectionError(APNSConnection.StateMachine.ErrorCode)
    }

    var machine: APNSConnection.StateMachine
    var reader = HTTP2FrameReader()
    let now = NIODeadline.uptimeNanoseconds(1_000_000_000)

    init(usesToken: Bool = false, streamCap: Int = .max) {
        self.machine = APNSConnection.StateMachine(usesToken: usesToken, streamCap: streamCap, allocator: ByteBufferAllocator())
        self.machine.channelActive()
    }

    /// Feeds bytes as one read; returns what the state machine asked for (`.none` left out).
    mutating func receive(_ bytes: [UInt8]) -> [Seen] {
        var buffer = ByteBuffer(bytes: bytes)
        self.reader.append(&buffer)
        var seen: [Seen] = []
        while self.machine.state != .closed {
            let action: APNSConnection.StateMachine.FrameAction
            do {
                guard let frame = try self.reader.next() else { break }
                action = self.machine.frameReceived(frame)
            } catch {
                action = self.machine.readFailed(error)
            }
            if let described = Self.describe(action) { seen.append(described) }
        }
        return seen
    }

    static func describe(_ action: APNSConnection.StateMachine.FrameAction) -> Seen? {
        switch action {
        case .none: return nil
        case .succeeded(let pending, let delivery): return .succeeded(tag: pending.request.tag, apnsID: delivery.apnsID)
        case .failed(let pending, let error): return .failed(tag: pending.request.tag, code: error.code, status: error.status)
        case .tokenExpired(let pending, _): return .tokenExpired(tag: pending.request.tag)
        case .refused(let pending): return .refused(tag: pending.request.tag)
        case .ready(let maxStreams): return .ready(maxStreams: maxStreams)
        case .goAway(let goAway):
            return .goAway(unprocessed: goAway.unprocessed.map(\.request.tag), failedBeforeReady: goAway.failedBeforeReady, code: goAway.code)
        case .connectionError(let code, _): return .connectionError(code)
        }
    }

    /// Submits a request tagged `tag`; true when it was written.
    mutating func submit(tag: Int, payload: [UInt8] = Array(#"{"aps":{}}"#.utf8), deadlineSeconds: Int64 = 60) throws -> Bool {
        let request = APNSRequest(
            deviceToken: try DeviceToken(hex: String(repeating: "ab", count: 32)),
            headers: NotificationHeaders(pushType: .alert, topic: "com.example.app"),
            payload: payload,
            tag: tag
        )
        let pending = Pending(
            request: request, completion: .callback { _, _ in }, submitted: self.now, deadline: self.now + .seconds(deadlineSeconds)
        )
        switch self.machine.submit(pending, authority: "api.push.apple.com", usesToken: false, sharedToken: nil) {
        case .sent: return true
        case .notSent: return false
        }
    }

    /// The frames written since the last call (the preface left out).
    mutating func sent() -> [WireFrame] {
        guard var bytes = self.machine.takeOutbound() else { return [] }
        if bytes.readableBytesView.starts(with: APNSConnection.StateMachine.preface) {
            bytes.moveReaderIndex(forwardBy: APNSConnection.StateMachine.preface.count)
        }
        return WireFrame.split(Array(bytes.readableBytesView))
    }

    /// SETTINGS from APNs, then our ACK read off.
    mutating func ready(maxStreams: UInt32 = 1000, extra: [(UInt16, UInt32)] = []) -> [Seen] {
        let seen = self.receive(Frames.settings([(3, maxStreams)] + extra))
        _ = self.sent()
        return seen
    }
}

/// Frames as APNs would send them, byte by byte.
enum Frames {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, payload: [UInt8] = []) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + Self.bytes(stream) + payload
    }

    static func bytes(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    static func settings(_ values: [(UInt16, UInt32)]) -> [UInt8] {
        Self.frame(4, payload: values.flatMap { withUnsafeBytes(of: $0.0.bigEndian) { Array($0) } + Self.bytes($0.1) })
    }

    /// HPACK: `:status` from the static table (200 is entry 8), `apns-id` as a literal.
    static func answerBlock(status: Int, apnsID: String? = nil) -> [UInt8] {
        var block: [UInt8] = status == 200 ? [0x88] : [0x08, 3] + Array(String(status).utf8)
        if let apnsID {
            block += [0x00, 7] + Array("apns-id".utf8) + [UInt8(apnsID.utf8.count)] + Array(apnsID.utf8)
        }
        return block
    }

    static func headers(stream: UInt32, status: Int, apnsID: String? = nil, endStream: Bool = true) -> [UInt8] {
        Self.frame(1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, payload: Self.answerBlock(status: status, apnsID: apnsID))
    }

    static func data(stream: UInt32, _ text: String, endStream: Bool = true) -> [UInt8] {
        Self.frame(0, flags: endStream ? 0x1 : 0, stream: stream, payload: Array(text.utf8))
    }

    static func rstStream(stream: UInt32, code: UInt32) -> [UInt8] { Self.frame(3, stream: stream, payload: Self.bytes(code)) }

    static func goAway(lastStreamID: UInt32, code: UInt32, debug: String = "") -> [UInt8] {
        Self.frame(7, payload: Self.bytes(lastStreamID) + Self.bytes(code) + Array(debug.utf8))
    }

    static func windowUpdate(stream: UInt32, _ increment: UInt32) -> [UInt8] { Self.frame(8, stream: stream, payload: Self.bytes(increment)) }
}

/// A frame the state machine wrote.
struct WireFrame: Equatable {
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: [UInt8]

    /// For GOAWAY: last-stream-id and error code.
    var goAway: (lastStreamID: UInt32, errorCode: UInt32)? {
        guard self.type == 7, self.payload.count >= 8 else { return nil }
        return (Self.integer(self.payload[0..<4]) & 0x7FFF_FFFF, Self.integer(self.payload[4..<8]))
    }

    /// For RST_STREAM and WINDOW_UPDATE: the 32-bit value.
    var value: UInt32? { self.payload.count == 4 ? Self.integer(self.payload[...]) : nil }

    static func integer(_ bytes: ArraySlice<UInt8>) -> UInt32 { bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }

    /// Cuts whole frames out of `bytes`.
    static func split(_ bytes: [UInt8]) -> [WireFrame] {
        var frames: [WireFrame] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let stream = Self.integer(bytes[index + 5..<index + 9]) & 0x7FFF_FFFF
            guard index + 9 + length <= bytes.count else { break }
            frames.append(
                WireFrame(type: bytes[index + 3], flags: bytes[index + 4], streamID: stream, payload: Array(bytes[index + 9..<index + 9 + length])))
            index += 9 + length
        }
        return frames
    }
}
