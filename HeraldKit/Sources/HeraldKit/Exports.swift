// SPDX-License-Identifier: Apache-2.0

// The API's types (requests, answers, the end-to-end envelope) are part of HeraldKit's own API:
// an app imports HeraldKit alone.
@_exported public import HeraldAPI
