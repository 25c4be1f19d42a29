// SPDX-License-Identifier: Apache-2.0
import Dispatch
import HTTPTypes
import NIOCore
import NIOHTTPTypes

extension RegistrationLaneHandler {
    /// Which of one connection's requests go to the lane, and the order of the answers: HTTP/1.1
    /// answers requests in the order they came, and a client may send the next before the answer
    /// (pipelining). So the lane takes a request only when the router owes the connection no
    /// answer, and while the lane works, whatever arrives is held (and, once something is, no
    /// more is read) until the lane's answer is written or the request is handed to the router.
    struct StateMachine {
        enum State {
            /// No request in progress.
            case idle
            /// A registration's body being read for the lane.
            case reading(head: HTTPRequest, request: RegistrationLane.Request)
            /// A registration with the lane: its parts kept in case it is handed to the router.
            case answering(head: HTTPRequest, body: ByteBuffer, trailers: HTTPFields?)
            /// Requests handed to the router that it has not finished answering.
            case routing(count: Int)
        }

        private(set) var state = State.idle
        /// The connection's TCP peer, for the rate limit's client address.
        let peer: String?
        /// A request handed to the router asked to close the connection after its answer: the
        /// router reads nothing after it, so neither does the lane.
        private(set) var closing = false

        /// Whether the lane is working on a request, so that what arrives meanwhile is held.
        var isAnswering: Bool {
            if case .answering = self.state { return true }
            return false
        }

        enum ReadAction {
            /// Pass the part on to the router.
            case forward
            /// Nothing to do yet: the part is kept.
            case keep
            /// The lane's request, read whole.
            case submit(RegistrationLane.Request)
            /// These parts (a request read for the lane that turned out too large, or not to end) go to the router, in order.
            case forwardParts([HTTPRequestPart])
        }

        init(peer: String?) {
            self.peer = peer
        }

        /// What to do with a part read while the lane is not answering (held parts wait until it is not).
        mutating func read(_ part: HTTPRequestPart) -> ReadAction {
            switch (self.state, part) {
            case (.idle, .head(let head)):
                guard !self.closing, let asked = RegistrationLane.registration(head) else {
                    self.state = .routing(count: 1)
                    self.noteClose(head)
                    return .forward
                }
                let request = RegistrationLane.Request(
                    appID: asked.appID, token: asked.token, authorization: asked.authorization,
                    forwardedFor: head.headerFields[values: .forwardedFor], peer: self.peer, body: ByteBuffer(),
                    arrived: DispatchTime.now().uptimeNanoseconds)
                self.state = .reading(head: head, request: request)
                return .keep
            case (.reading(let head, var request), .body(var chunk)):
                guard request.body.readableBytes + chunk.readableBytes <= RegistrationLane.bodyLimit else {
                    self.state = .routing(count: 1)
                    return .forwardParts([.head(head), .body(request.body), .body(chunk)])
                }
                self.state = .idle  // drops the state's copy of the body, so that it grows in place
                request.body.writeBuffer(&chunk)
                self.state = .reading(head: head, request: request)
                return .keep
            case (.reading(let head, let request), .end(let trailers)):
                self.state = .answering(head: head, body: request.body, trailers: trailers)
                return .submit(request)
            case (.routing(let count), .head(let head)):
                self.state = .routing(count: count + 1)
                self.noteClose(head)
                return .forward
            case (.reading(let head, let request), .head):
                // The parser never starts a request before ending the last: hand both to the router.
                self.state = .routing(count: 2)
                return .forwardParts([.head(head), .body(request.body), part])
            case (.idle, _), (.routing, _):
                return .forward
            case (.answering, _):
                preconditionFailure("a part is held, not read, while the lane answers")
            }
        }

        /// The lane did not take the request (it has stopped) or handed it back: its parts go to the router.
        mutating func route() -> [HTTPRequestPart] {
            guard case .answering(let head, let body, let trailers) = self.state else { preconditionFailure("no request with the lane") }
            self.state = .routing(count: 1)
            return [.head(head), .body(body), .end(trailers)]
        }

        private mutating func noteClose(_ head: HTTPRequest) {
            if RegistrationLane.asksToClose(head) { self.closing = true }
        }

        /// The lane's answer is written.
        mutating func answered() {
            guard case .answering = self.state else { preconditionFailure("no request with the lane") }
            self.state = .idle
        }

        /// The router wrote the end of an answer.
        mutating func routerAnswered() {
            switch self.state {
            case .routing(let count) where count > 1:
                self.state = .routing(count: count - 1)
            case .routing:
                self.state = .idle
            case .idle, .reading, .answering:
                // Not an answer to a request read here (the server's own, such as a 400 for a request it could not parse).
                break
            }
        }
    }
}
