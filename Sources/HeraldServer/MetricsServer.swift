// SPDX-License-Identifier: Apache-2.0
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus

/// The metrics listener: `/metrics` in Prometheus's text format, and nothing else, on its own
/// address (loopback by default), apart from the API's port that apps reach from the internet.
/// It reads no key: who can reach its address can read the counters (app ids, volumes, failure
/// reasons), so it is opened only to a scraper's network.
enum MetricsServer {
    static func application(
        registry: PrometheusCollectorRegistry, host: String, port: Int, eventLoopGroup: any EventLoopGroup, logger: Logger,
        onRunning: @escaping @Sendable (Int) -> Void
    ) -> some ApplicationProtocol {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        return Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "herald-metrics"),
            onServerRunning: { channel in onRunning(channel.localAddress?.port ?? 0) },
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: logger
        )
    }
}
