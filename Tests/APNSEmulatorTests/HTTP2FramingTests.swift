// SPDX-License-Identifier: Apache-2.0
import APNSEmulator
import APNSModels
import HeraldTesting
import Testing

/// The emulator's HTTP/2 framing under peers that push RFC 9113's edges, over cleartext HTTP/2.
@Suite(.heavy) struct HTTP2FramingTests {
    /// HEADERS (END_STREAM | END_HEADERS) for `POST http "/"` from HPACK's static table.
    static func request(_ stream: UInt8) -> [UInt8] { [0, 0, 3, 1, 0x05, 0, 0, 0, stream, 0x83, 0x86, 0x84] }

    static func settings(_ identifier: UInt8, _ value: UInt32) -> [UInt8] {
        [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, identifier] + withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    func exchange(_ fixture: EmulatorFixture, _ bytes: [UInt8], until: (UInt8, UInt32)) async throws -> [RawFrame] {
        try await RawHTTP2.exchange(
            port: fixture.emulator.cleartextPorts[.development]!, tls: false, send: RawHTTP2.preface + bytes, readFor: 15, until: until
        ).frames
    }

    static func configure(_ configuration: inout APNSEmulator.Configuration) {
        configuration.listeners.append(.init(environment: .development, port: 0, tls: false))
    }

    @Test("answers are split to fit a small client window, and continue when it opens")
    func smallWindow() async throws {
        try await withEmulatorFixture(configure: Self.configure) { fixture in
            // Window 10: the 20-byte BadPath body goes out as 10 bytes, then 10 more after WINDOW_UPDATE.
            let windowUpdate: [UInt8] = [0, 0, 4, 8, 0, 0, 0, 0, 1, 0, 0, 0, 100]
            let frames = try await self.exchange(fixture, Self.settings(4, 10) + Self.request(1) + windowUpdate, until: (0, 1))
            let data = frames.filter { $0.type == 0 && $0.streamID == 1 }
            #expect(data.map(\.payload.count) == [10, 10])
            #expect(data.map(\.flags) == [0, 1])
            #expect(String(decoding: data.flatMap(\.payload), as: UTF8.self) == #"{"reason":"BadPath"}"#)
        }
    }

    @Test("a client that shrinks its HPACK table is told so at the start of the next header block")
    func tableSizeUpdate() async throws {
        try await withEmulatorFixture(configure: Self.configure) { fixture in
            let frames = try await self.exchange(fixture, Self.settings(1, 0) + Self.request(1), until: (1, 1))
            let headers = try #require(frames.first { $0.type == RawFrame.headersType && $0.streamID == 1 })
            #expect(headers.payload.first == 0x20)  // dynamic table size update to 0
        }
    }

    @Test("window overflow, bad frame sizes and frames on closed streams get the RFC's errors")
    func protocolErrors() async throws {
        try await withEmulatorFixture(configure: Self.configure) { fixture in
            let overflow: [UInt8] = [0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF]
            let flow = try await self.exchange(fixture, overflow, until: (RawFrame.goAwayType, 0))
            #expect(flow.compactMap(\.goAway).first?.errorCode == 3)  // FLOW_CONTROL_ERROR

            let shortPing: [UInt8] = [0, 0, 4, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4]
            let size = try await self.exchange(fixture, shortPing, until: (RawFrame.goAwayType, 0))
            #expect(size.compactMap(\.goAway).first?.errorCode == 6)  // FRAME_SIZE_ERROR

            // DATA after the stream ended: STREAM_CLOSED for that stream, the connection goes on.
            let late: [UInt8] = [0, 0, 1, 0, 0, 0, 0, 0, 1, 0x41]
            let closed = try await self.exchange(fixture, Self.request(1) + late + Self.request(3), until: (1, 3))
            #expect(closed.contains { $0.type == RawFrame.rstStreamType && $0.streamID == 1 && $0.payload == [0, 0, 0, 5] })
            #expect(closed.contains { $0.type == RawFrame.headersType && $0.streamID == 3 })
        }
    }
}
