// SPDX-License-Identifier: Apache-2.0
import HeraldServer
import Logging
import Synchronization
import Testing

/// `herald serve`'s log handler writes what swift-log's `StreamLogHandler` writes, line for line.
@Suite struct HeraldLogHandlerTests {
    /// The lines a handler wrote, each without its timestamp (its first word).
    final class Capture: TextOutputStream, Sendable {
        private let lines = Mutex<[String]>([])

        func write(_ string: String) {
            self.lines.withLock { $0.append(String(string.drop { $0 != " " })) }
        }

        var written: [String] { self.lines.withLock { $0 } }
    }

    /// The same steps on a logger of either handler: metadata set, overridden by a line's own,
    /// changed on a copy (which must leave the original as it was), removed; a line below the level.
    static func steps(_ logger: Logger) {
        var logger = logger
        logger.logLevel = .debug
        logger.info("plain")
        logger[metadataKey: "request"] = "r1"
        logger.info("with the logger's metadata")
        logger.info("and the line's", metadata: ["line": "l", "request": "overridden"])
        var copy = logger
        copy[metadataKey: "copy"] = .stringConvertible(42)
        copy.debug("the copy's")
        logger.trace("below the level")
        logger.notice("the original's, unchanged by the copy")
        logger[metadataKey: "request"] = nil
        logger.warning("its metadata removed", metadata: ["nested": ["a", .dictionary(["k": "v"])]])
        logger.handler.metadata = ["whole": "set at once"]
        logger.error("the logger's metadata set whole")
    }

    @Test func writesTheLinesStreamLogHandlerWrites() {
        let ours = Capture()
        let theirs = Capture()
        Self.steps(Logger(label: "herald") { HeraldLogHandler(label: $0, stream: ours) })
        Self.steps(Logger(label: "herald") { StreamLogHandler(label: $0, stream: theirs) })
        #expect(ours.written == theirs.written)
        #expect(ours.written.count == 7)
        #expect(ours.written.first == " info herald: [HeraldServerTests] plain\n")
        #expect(ours.written[2] == " info herald: line=l request=overridden [HeraldServerTests] and the line's\n")
        #expect(ours.written[3] == " debug herald: copy=42 request=r1 [HeraldServerTests] the copy's\n")
        #expect(ours.written[4] == " notice herald: request=r1 [HeraldServerTests] the original's, unchanged by the copy\n")
    }

    @Test func addsWhatItsMetadataProviderProvides() {
        let provider = Logger.MetadataProvider { ["provided": "p", "request": "from the provider"] }
        let ours = Capture()
        let theirs = Capture()
        var handler = HeraldLogHandler(label: "herald", stream: ours)
        handler.metadataProvider = provider
        var stream = StreamLogHandler(label: "herald", stream: theirs)
        stream.metadataProvider = provider
        Self.steps(Logger(label: "herald") { _ in handler })
        Self.steps(Logger(label: "herald") { _ in stream })
        #expect(ours.written == theirs.written)
        #expect(ours.written.first == " info herald: provided=p request=from the provider [HeraldServerTests] plain\n")
    }
}
