// SPDX-License-Identifier: Apache-2.0
import APNSModels
import HeraldTesting

/// What FCM's answers carry, read from a raw response.
extension RawResponse {
    /// `error.status`, `error.message` and the FcmError `errorCode` of a Google error envelope.
    var googleStatus: String? { self.json?["error"]?["status"]?.stringValue }
    var googleMessage: String? { self.json?["error"]?["message"]?.stringValue }
    var errorCode: String? {
        self.json?["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue?.hasSuffix("FcmError") == true }?["errorCode"]?
            .stringValue
    }
    var fieldViolation: String? {
        self.json?["error"]?["details"]?.arrayValue?.first { $0["@type"]?.stringValue?.hasSuffix("BadRequest") == true }?[
            "fieldViolations"
        ]?.arrayValue?.first?["field"]?.stringValue
    }
}
