// SPDX-License-Identifier: Apache-2.0
import APNSModels
import CoreMetrics

/// The client's swift-metrics instruments, made once per client (never per request).
/// Labels carry no tokens, ids or topics: only outcomes, reasons and classes.
struct ClientMetrics: Sendable {
    let succeeded: Counter
    let resent: Counter
    let refusedStreams: Counter
    let deadlines: Counter
    /// Written, unanswered, not resent: APNs may or may not have delivered them.
    let unknownOutcomes: Counter
    let connectionsOpened: Counter
    let connectionFailures: Counter
    let tokenRefreshes: Counter
    let latency: Timer
    private let failedByClass: [FailureClass: Counter]

    init(environment: String) {
        let dimensions = [("environment", environment)]
        self.succeeded = Counter(label: "apns_client_requests_total", dimensions: dimensions + [("result", "success")])
        self.resent = Counter(label: "apns_client_resends_total", dimensions: dimensions)
        self.refusedStreams = Counter(label: "apns_client_refused_streams_total", dimensions: dimensions)
        self.deadlines = Counter(label: "apns_client_deadlines_exceeded_total", dimensions: dimensions)
        self.unknownOutcomes = Counter(label: "apns_client_unknown_outcomes_total", dimensions: dimensions)
        self.connectionsOpened = Counter(label: "apns_client_connections_opened_total", dimensions: dimensions)
        self.connectionFailures = Counter(label: "apns_client_connection_failures_total", dimensions: dimensions)
        self.tokenRefreshes = Counter(label: "apns_client_provider_token_refreshes_total", dimensions: dimensions)
        self.latency = Timer(label: "apns_client_request_duration", dimensions: dimensions)
        var failed: [FailureClass: Counter] = [:]
        for failureClass in FailureClass.allCases {
            failed[failureClass] = Counter(
                label: "apns_client_requests_total",
                dimensions: dimensions + [("result", "failure"), ("class", failureClass.rawValue)]
            )
        }
        self.failedByClass = failed
    }

    func failed(_ failureClass: FailureClass) {
        self.failedByClass[failureClass]?.increment()
    }
}
