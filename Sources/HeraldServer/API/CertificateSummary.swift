// SPDX-License-Identifier: Apache-2.0
import Foundation
import SwiftASN1
import X509

/// What a PEM certificate says about itself that an operator needs: its subject and when it
/// expires. One reading, for the API's credential metadata and the dashboard's warnings.
struct CertificateSummary: Sendable, Hashable {
    var subject: String
    var notValidAfter: Date

    /// Nil when `pem` is not a readable certificate.
    init?(pem: String) {
        guard let certificate = try? Certificate(pemEncoded: pem) else { return nil }
        self.subject = certificate.subject.description
        self.notValidAfter = certificate.notValidAfter
    }

    /// The expiry in milliseconds since 1970.
    var expiresAtMilliseconds: Int64 { Int64((self.notValidAfter.timeIntervalSince1970 * 1000).rounded()) }
}
