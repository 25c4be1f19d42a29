// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HTTPTypes
import HeraldCore
import Hummingbird
import NIOCore

/// Decodes request bodies into the API's `Codable` types, strictly: at most ``API/bodyLimit``
/// bytes (413 `body_too_large`), JSON (400 `invalid_json`), an object, and no field the type
/// does not have (400 `unknown_field`). A field of the wrong type is `bad_<field>`.
struct APIRequestDecoder: RequestDecoder {
    func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: API.bodyLimit)
        } catch {
            throw HeraldError.tooLarge
        }
        return try Self.decode(type, json: try Self.parse(buffer.readableBytesView))
    }

    static func parse(_ bytes: some Collection<UInt8>) throws(HeraldError) -> JSONValue {
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw HeraldError.invalid("the body is not JSON: \(error)", code: "invalid_json")
        }
        guard case .object = value else { throw HeraldError.invalid("the body must be a JSON object", code: "invalid_json") }
        return value
    }

    /// `json` as `T`, with the API's error for what does not fit.
    static func decode<T: Decodable>(_ type: T.Type, json: JSONValue) throws(HeraldError) -> T {
        do {
            return try JSONValueDecoder().decode(type, from: json)
        } catch {
            switch error.kind {
            case .unknownField: throw HeraldError.invalid(error.message, code: "unknown_field")
            case .duplicateField: throw HeraldError.invalid(error.message, code: "duplicate_field")
            case .mismatch: throw HeraldError.invalid(error.message, code: Self.code(forField: error.field))
            }
        }
    }

    /// The code of a request field's errors, the same whether its type or its value is wrong.
    static func code(forField field: String) -> String {
        switch field {
        case "": return "invalid_json"
        case "pushType": return "bad_push_type"
        case "ttl", "expiration": return "bad_expiration"
        case "collapseId": return "bad_collapse_id"
        case "scheduledAt": return "bad_scheduled_at"
        case "localTime": return "bad_local_time"
        case "idempotencyKey": return "bad_idempotency_key"
        case "onUnknownOutcome": return "bad_on_unknown_outcome"
        case "publicKey", "publicKeyType": return "bad_public_key"
        case "environment", "restrictedTo": return "bad_environment"
        case "privateKey", "keyId", "teamId": return "bad_credentials"
        default: return "bad_\(field)"
        }
    }
}

/// Encodes the API's answers with Herald's own JSON writer, every field of the shape present
/// (null when it has no value), in declaration order.
struct APIResponseEncoder: ResponseEncoder {
    func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        API.json(.ok, try APIJSONEncoder().encode(value))
    }
}

/// An answer with a status other than 200: `201 Created`, `202 Accepted`.
struct Answer<Body: Encodable & Sendable>: ResponseGenerator {
    var status: HTTPResponse.Status
    var body: Body

    init(_ status: HTTPResponse.Status, _ body: Body) {
        self.status = status
        self.body = body
    }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        API.json(self.status, try APIJSONEncoder().encode(self.body))
    }
}
