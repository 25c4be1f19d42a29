// SPDX-License-Identifier: Apache-2.0
import APNSClient
import APNSModels
import HeraldCore
import Logging

/// APNs under the delivery engine: a group's pushes through its app's ``APNSClient`` for the
/// route's environment (``ClientProvider``), end-to-end encrypted payloads sealed per device,
/// receipt ids spliced in, every answer of APNs mapped to the engine's terms.
struct APNsPushTransport: PushTransport {
    let clients: ClientProvider
    let logger: Logger

    func send(
        _ deliveries: [ClaimedDelivery], route: Route, lane: ClientLane, receipts: ReceiptID?, answer: (Int, TransportAnswer) -> Void
    ) async {
        guard let first = deliveries.first, let environment = route.apnsEnvironment else { return }
        let client: APNSClient
        do {
            client = try await self.clients.client(appID: first.appID, environment: environment, lane: lane)
        } catch {
            self.logger.warning("no APNs client", metadata: ["herald.app": "\(first.appID)", "error": "\(error.message)"])
            self.answerAll(deliveries, error, answer: answer)
            return
        }
        var requests: [APNSRequest] = []
        requests.reserveCapacity(deliveries.count)
        for (index, delivery) in deliveries.enumerated() {
            let headers = NotificationHeaders(
                pushType: delivery.pushType, topic: delivery.topic, priority: delivery.priority,
                expiration: delivery.expiration.map { $0 == 0 ? .immediately : .at(epochSeconds: $0) } ?? .storagePolicy,
                collapseID: UnknownOutcomePolicy.collapseID(sender: delivery.collapseID, notificationID: delivery.notificationID)
            )
            let payload: [UInt8]
            if let placeholder = delivery.placeholder {
                guard let sealed = DeliveryEngine.seal(delivery, placeholder: DeliveryEngine.withReceipt(placeholder, delivery, receipts)) else {
                    answer(index, .refused(status: nil, reason: "NoEncryptionKey", invalidate: false, timestamp: nil))
                    continue
                }
                payload = sealed
            } else {
                payload = DeliveryEngine.withReceipt(delivery.payload, delivery, receipts)
            }
            guard let token = try? DeviceToken(hex: delivery.token) else {
                answer(index, .refused(status: nil, reason: "BadDeviceToken", invalidate: true, timestamp: nil))
                continue
            }
            requests.append(APNSRequest(deviceToken: token, headers: headers, payload: payload, tag: index))
        }
        do {
            try await client.send(requests) { result in
                switch result.result {
                case .success(let accepted): answer(result.request.tag, .sent(id: accepted.apnsID))
                case .failure(let error): answer(result.request.tag, Self.answer(error))
                }
            }
        } catch {
            // The input never throws and the handler neither: unreachable in practice; leases retry.
            self.logger.error("bulk send ended early", metadata: ["error": "\(error)"])
        }
    }

    /// What APNs's failure means for the delivery (``APNSClientError/failureClass``).
    static func answer(_ error: APNSClientError) -> TransportAnswer {
        if error.outcomeUnknown { return .unknown(status: error.status) }
        let reason = error.reason?.rawValue ?? error.code.rawValue
        switch error.failureClass {
        case .invalidateToken: return .refused(status: error.status, reason: reason, invalidate: true, timestamp: error.timestampMilliseconds)
        case .fixAndDrop: return .refused(status: error.status, reason: reason, invalidate: false, timestamp: nil)
        case .retryLater: return .retryLater(status: error.status, reason: reason, after: nil)
        }
    }
}
