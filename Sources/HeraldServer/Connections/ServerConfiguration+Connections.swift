// SPDX-License-Identifier: Apache-2.0
import HummingbirdCore
import NIOCore

extension ServerConfiguration {
    /// The API's HTTP/1.1 server with this configuration's connection limits.
    func httpServer(lane: RegistrationLane?) -> HTTPServerBuilder {
        let idleTimeout = self.idleTimeout.map { TimeAmount($0) }
        let requestHeadTimeout = self.requestHeadTimeout
        let connections = self.maxConnections.map { OpenConnections(limit: $0) }
        return HTTPServerBuilder { responder in
            LimitedHTTP1Channel(
                http1: HTTP1Channel(responder: responder, configuration: .init(idleTimeout: idleTimeout)),
                requestHeadTimeout: requestHeadTimeout,
                connections: connections,
                lane: lane
            )
        }
    }
}
