// SPDX-License-Identifier: Apache-2.0
public import HeraldAPI
public import Hummingbird

// The data-governance routes' answers, returned directly like the others'.
extension CredentialList: ResponseEncodable {}
extension UserDataResponse: ResponseEncodable {}
extension UserErasureResponse: ResponseEncodable {}
extension AuditList: ResponseEncodable {}
