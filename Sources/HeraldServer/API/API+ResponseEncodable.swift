// SPDX-License-Identifier: Apache-2.0
public import HeraldAPI
public import Hummingbird

// Routes return the API's types directly; the context's encoder writes them. The types live in
// the HeraldKit package, which has no Hummingbird: these conformances are ours alone (@retroactive).
extension AppResponse: @retroactive ResponseEncodable {}
extension AppList: @retroactive ResponseEncodable {}
extension CreatedKey: @retroactive ResponseEncodable {}
extension KeyList: @retroactive ResponseEncodable {}
extension DeviceResponse: @retroactive ResponseEncodable {}
extension DeviceList: @retroactive ResponseEncodable {}
extension DeliveryList: @retroactive ResponseEncodable {}
extension SendResponse: @retroactive ResponseEncodable {}
extension NotificationList: @retroactive ResponseEncodable {}
extension NotificationDetail: @retroactive ResponseEncodable {}
extension CancelResponse: @retroactive ResponseEncodable {}
extension WebhookResponse: @retroactive ResponseEncodable {}
extension WebhookList: @retroactive ResponseEncodable {}
extension TemplateResponse: @retroactive ResponseEncodable {}
extension TemplateList: @retroactive ResponseEncodable {}
extension TemplatePreview: @retroactive ResponseEncodable {}
extension ChannelResponse: @retroactive ResponseEncodable {}
extension ChannelList: @retroactive ResponseEncodable {}
extension LiveActivityResponse: @retroactive ResponseEncodable {}
extension LiveActivityList: @retroactive ResponseEncodable {}
extension WebhookMessageList: @retroactive ResponseEncodable {}
extension HealthResponse: @retroactive ResponseEncodable {}
extension UserSecretResponse: @retroactive ResponseEncodable {}
extension UserAssertionResponse: @retroactive ResponseEncodable {}
extension RotatedKey: @retroactive ResponseEncodable {}
extension ReceiptBatchResponse: @retroactive ResponseEncodable {}
extension WebPushKeyResponse: @retroactive ResponseEncodable {}
