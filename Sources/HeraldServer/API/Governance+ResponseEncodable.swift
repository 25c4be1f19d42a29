// SPDX-License-Identifier: Apache-2.0
public import HeraldAPI
public import Hummingbird

// The data-governance routes' answers, returned directly like the others'.
extension CredentialList: @retroactive ResponseEncodable {}
extension UserDataResponse: @retroactive ResponseEncodable {}
extension UserErasureResponse: @retroactive ResponseEncodable {}
extension AuditList: @retroactive ResponseEncodable {}
