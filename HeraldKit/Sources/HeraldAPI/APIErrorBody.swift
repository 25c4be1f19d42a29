// SPDX-License-Identifier: Apache-2.0

/// Every error answer: `{"error": {"code", "message"}}`. `code` is stable (clients branch on it);
/// `message` is for people. One code always comes with one HTTP status.
public struct APIErrorBody: Sendable, Hashable, Codable {
    public struct Detail: Sendable, Hashable, Codable {
        public var code: String
        public var message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public var error: Detail

    public init(code: String, message: String) {
        self.error = Detail(code: code, message: message)
    }
}

/// `GET /health`.
public struct HealthResponse: Sendable, Hashable, Codable {
    public var status: String
    public var database: String

    public init(status: String, database: String) {
        self.status = status
        self.database = database
    }
}
