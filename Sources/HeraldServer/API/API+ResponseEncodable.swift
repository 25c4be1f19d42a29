// SPDX-License-Identifier: Apache-2.0
public import HeraldAPI
public import Hummingbird

// Routes return the API's types directly; the context's encoder writes them.
extension AppResponse: ResponseEncodable {}
extension AppList: ResponseEncodable {}
extension CreatedKey: ResponseEncodable {}
extension KeyList: ResponseEncodable {}
extension DeviceResponse: ResponseEncodable {}
extension DeviceList: ResponseEncodable {}
extension DeliveryList: ResponseEncodable {}
extension SendResponse: ResponseEncodable {}
extension NotificationList: ResponseEncodable {}
extension NotificationDetail: ResponseEncodable {}
extension CancelResponse: ResponseEncodable {}
extension WebhookResponse: ResponseEncodable {}
extension WebhookList: ResponseEncodable {}
extension WebhookMessageList: ResponseEncodable {}
extension HealthResponse: ResponseEncodable {}
extension UserSecretResponse: ResponseEncodable {}
extension UserAssertionResponse: ResponseEncodable {}
extension RotatedKey: ResponseEncodable {}
extension ReceiptBatchResponse: ResponseEncodable {}
