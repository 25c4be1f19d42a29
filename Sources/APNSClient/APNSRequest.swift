// SPDX-License-Identifier: Apache-2.0
public import APNSModels

/// One device push: where it goes, its headers and its encoded JSON payload.
public struct APNSRequest: Sendable {
    public var deviceToken: DeviceToken
    public var headers: NotificationHeaders
    /// The payload as sent: UTF-8 JSON.
    public var payload: [UInt8]
    /// The caller's own identifier (a delivery record, an input line), handed back with the
    /// outcome of a bulk send. Never sent to APNs.
    public var tag: Int

    public init(deviceToken: DeviceToken, headers: NotificationHeaders, payload: [UInt8], tag: Int = 0) {
        self.deviceToken = deviceToken
        self.headers = headers
        self.payload = payload
        self.tag = tag
    }

    /// Encodes a typed payload, checking it against the push type's rules.
    public init(deviceToken: DeviceToken, headers: NotificationHeaders, payload: Payload, tag: Int = 0) throws(APNSValidationError) {
        self.init(deviceToken: deviceToken, headers: headers, payload: try payload.encode(for: headers.pushType), tag: tag)
    }

    /// Every rule APNs would refuse the request for that can be checked here: headers (topic
    /// suffix, priority, collapse id, apns-id, expiration), payload size for the push type and
    /// JSON well-formedness, and whether the push type may travel over this kind of connection.
    public func validate(certificateAuthentication: Bool) throws(APNSValidationError) {
        var checked: [UInt8]? = nil
        try self.validate(certificateAuthentication: certificateAuthentication, checkedPayload: &checked)
    }

    /// ``validate(certificateAuthentication:)``, parsing the payload as JSON only when it is not
    /// `checkedPayload`'s very storage (a bulk send of one notification shares one payload);
    /// a payload found to be JSON becomes `checkedPayload`.
    func validate(certificateAuthentication: Bool, checkedPayload: inout [UInt8]?) throws(APNSValidationError) {
        try self.headers.validate()
        try PayloadRules.checkSize(self.payload.count, pushType: self.headers.pushType)
        if checkedPayload.map(self.payload.sharesStorage(with:)) != true {
            do {
                try JSONValue.validate(self.payload)
            } catch {
                throw APNSValidationError(.payloadNotJSON, "the payload is not JSON: \(error)")
            }
            checkedPayload = self.payload
        }
        let pushType = self.headers.pushType
        if certificateAuthentication ? !pushType.allowsCertificateAuthentication : !pushType.allowsTokenAuthentication {
            throw APNSValidationError(
                .pushTypeNotAllowedForAuth,
                "\(pushType) pushes need \(certificateAuthentication ? "token" : "certificate") authentication"
            )
        }
    }
}

/// What APNs answered for an accepted push.
public struct APNSDelivery: Sendable, Hashable {
    /// The `apns-id` APNs answered with (the request's own when it set one).
    public var apnsID: String?
    /// `apns-unique-id`: development only, for looking the push up in Apple's delivery log.
    public var uniqueID: String?

    public init(apnsID: String?, uniqueID: String?) {
        self.apnsID = apnsID
        self.uniqueID = uniqueID
    }
}

/// Why a push did not go through, with a stable `code` and what to do about it (`failureClass`).
public struct APNSClientError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        private init(_ rawValue: String) { self.rawValue = rawValue }

        /// Refused locally, before the wire: `validation` names the rule.
        public static let invalidRequest = Code("invalid_request")
        /// APNs answered with an error: `status`, `reason`, and for 410 `timestamp`.
        public static let rejected = Code("rejected")
        /// No answer before the request's deadline. It may or may not have been delivered.
        public static let deadlineExceeded = Code("deadline_exceeded")
        /// No connection could carry it (connect, TLS or HTTP/2 failures), after the client's own resends.
        public static let connectionFailed = Code("connection_failed")
        /// It was written to APNs and the connection ended before the answer: it may or may not
        /// have been delivered. The client does not send it again itself (see ``outcomeUnknown``).
        public static let unknownOutcome = Code("unknown_outcome")
        /// The client was shut down before the request was sent.
        public static let shutdown = Code("shutdown")
        /// The client's configuration or credentials cannot be used.
        public static let badConfiguration = Code("bad_configuration")

        public var description: String { self.rawValue }
    }

    public var code: Code
    public var message: String
    /// HTTP status, for `rejected`.
    public var status: Int?
    /// APNs's reason string, for `rejected`.
    public var reason: APNSReason?
    /// For 410: when APNs learned the token stopped being valid (ms since 1970).
    public var timestampMilliseconds: Int64?
    /// The `apns-id` of the rejected request, when APNs sent one.
    public var apnsID: String?
    /// The broken rule, for `invalidRequest`.
    public var validation: APNSValidationError?
    /// Whether APNs may have delivered it: it was written and no answer came (`unknownOutcome`:
    /// the connection ended; `deadlineExceeded`: the deadline passed in flight; `connectionFailed`:
    /// a stream reset, or a close after GOAWAY, at or below its last-stream-id). Sending it again
    /// may show it twice; the client never does so itself. False: APNs answered, or never had it.
    public var outcomeUnknown: Bool

    public init(
        code: Code,
        message: String,
        status: Int? = nil,
        reason: APNSReason? = nil,
        timestampMilliseconds: Int64? = nil,
        apnsID: String? = nil,
        validation: APNSValidationError? = nil,
        outcomeUnknown: Bool = false
    ) {
        self.outcomeUnknown = outcomeUnknown
        self.code = code
        self.message = message
        self.status = status
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
        self.apnsID = apnsID
        self.validation = validation
    }

    /// What the caller should do: drop the token, fix the request, or try again later.
    /// Transport failures and deadlines are `retryLater`; local refusals `fixAndDrop`.
    public var failureClass: FailureClass {
        switch self.code {
        case .rejected: return (self.reason ?? APNSReason(rawValue: "")).failureClass(status: self.status ?? 400)
        case .invalidRequest, .badConfiguration: return .fixAndDrop
        default: return .retryLater
        }
    }

    public var description: String {
        if let status = self.status { return "\(self.code) \(status) \(self.reason?.rawValue ?? "-"): \(self.message)" }
        return "\(self.code): \(self.message)"
    }

    static func invalid(_ error: APNSValidationError) -> APNSClientError {
        APNSClientError(code: .invalidRequest, message: error.description, validation: error)
    }
}

public typealias APNSResult = Result<APNSDelivery, APNSClientError>

/// A request of a bulk send and what became of it.
public struct APNSOutcome: Sendable {
    public var request: APNSRequest
    public var result: APNSResult
}

extension [UInt8] {
    /// Whether both are the same live storage, hence the same bytes: while `other` holds its
    /// storage, no other array can be given that address, and neither can change it in place.
    func sharesStorage(with other: [UInt8]) -> Bool {
        guard !self.isEmpty, self.count == other.count else { return false }
        return self.withUnsafeBufferPointer { mine in other.withUnsafeBufferPointer { $0.baseAddress == mine.baseAddress } }
    }
}
