// SPDX-License-Identifier: Apache-2.0
public import Foundation
import HeraldAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one ``HeraldClient/flushReceipts()`` did.
public struct ReceiptFlush: Sendable, Hashable {
    /// Reports Herald applied, and those it had already (a replay changes nothing).
    public var applied: Int
    public var duplicates: Int
    /// Refused for good (not a receipt id of this app, a bad event): dropped.
    public var refused: Int
    /// Still queued: Herald had not recorded their delivery yet, or the network failed.
    public var queued: Int
    /// Of those sent, the ones Herald had not recorded the delivery of yet (tried again).
    var waiting = 0

    public init(applied: Int = 0, duplicates: Int = 0, refused: Int = 0, queued: Int = 0) {
        self.applied = applied
        self.duplicates = duplicates
        self.refused = refused
        self.queued = queued
    }
}

/// Receipts waiting to be sent: in memory, and in `file` when given (so that what a service
/// extension queued and could not send is sent by the next flush of the app or the extension:
/// give both the same file in the app group's container).
final class ReceiptQueue: @unchecked Sendable {
    struct Entry: Codable, Hashable {
        var item: ReceiptItem
        /// How many flushes Herald answered `delivery_unknown` (not recorded yet) for it.
        var tries = 0
    }

    /// A report Herald has not recorded the delivery of after this many flushes is dropped.
    static let maximumTries = 10
    /// At most this many wait; the oldest go first.
    static let capacity = 5000

    private let lock = NSLock()
    private var entries: [Entry] = []
    /// Taken by a flush in progress.
    private var sending = false
    let file: URL?

    init(file: URL?) {
        self.file = file
        if let file, let data = try? Data(contentsOf: file), let saved = try? JSONDecoder().decode([Entry].self, from: data) {
            self.entries = saved
        }
    }

    var count: Int { self.lock.withLock { self.entries.count } }

    func append(_ item: ReceiptItem) {
        self.lock.withLock {
            // One report per receipt and event: a repeat would change nothing on the server.
            guard !self.entries.contains(where: { $0.item.receipt == item.receipt && $0.item.event == item.event }) else { return }
            self.entries.append(Entry(item: item))
            if self.entries.count > Self.capacity { self.entries.removeFirst(self.entries.count - Self.capacity) }
            self.save()
        }
    }

    /// Up to `limit` entries for one flush, or nil when another flush is sending.
    func take(_ limit: Int) -> [Entry]? {
        self.lock.withLock {
            guard !self.sending else { return nil }
            self.sending = true
            return Array(self.entries.prefix(limit))
        }
    }

    /// Ends a flush's batch: `sent` leave the queue, except `retry` (their tries counted).
    func finish(sent: [Entry], retry: Set<Int>) {
        self.lock.withLock {
            self.sending = false
            let done = Set(sent.map { "\($0.item.receipt) \($0.item.event)" })
            var kept: [Entry] = []
            for (index, entry) in sent.enumerated() where retry.contains(index) && entry.tries + 1 < Self.maximumTries {
                var again = entry
                again.tries += 1
                kept.append(again)
            }
            self.entries = kept + self.entries.filter { !done.contains("\($0.item.receipt) \($0.item.event)") }
            self.save()
        }
    }

    /// A batch that could not be sent (no network): everything stays.
    func release() {
        self.lock.withLock { self.sending = false }
    }

    private func save() {
        guard let file = self.file, let data = try? JSONEncoder().encode(self.entries) else { return }
        try? data.write(to: file, options: .atomic)
    }
}

extension HeraldClient {
    /// The receipt id Herald put in a push's payload (the custom key `hr`, beside `aps`), if any.
    public static func receiptID(in userInfo: [AnyHashable: Any]) -> String? {
        userInfo[ReceiptBatch.payloadKey] as? String
    }

    /// The receipt id in a payload as HeraldKit reads it.
    public static func receiptID(in payload: PayloadValue) -> String? {
        payload[ReceiptBatch.payloadKey]?.string
    }

    /// Queues "received" for the push whose payload is `userInfo` (call it from the notification
    /// service extension, or when a background push arrives); ``flushReceipts()`` sends the
    /// queue. False when the push carries no receipt id.
    @discardableResult
    public func reportReceived(_ userInfo: [AnyHashable: Any], at date: Date = Date()) -> Bool {
        self.queueReceipt(Self.receiptID(in: userInfo), event: "received", action: nil, at: date)
    }

    /// Queues "opened" for the push the user opened, with the action chosen (the response's
    /// `actionIdentifier` when it is one of the category's actions; nil for a plain open).
    /// Call it from `userNotificationCenter(_:didReceive:)`, then ``flushReceipts()``.
    @discardableResult
    public func reportOpened(_ userInfo: [AnyHashable: Any], action: String? = nil, at date: Date = Date()) -> Bool {
        self.queueReceipt(Self.receiptID(in: userInfo), event: "opened", action: action, at: date)
    }

    /// ``reportReceived(_:at:)`` for a payload as HeraldKit reads it.
    @discardableResult
    public func reportReceived(payload: PayloadValue, at date: Date = Date()) -> Bool {
        self.queueReceipt(Self.receiptID(in: payload), event: "received", action: nil, at: date)
    }

    /// ``reportOpened(_:action:at:)`` for a payload as HeraldKit reads it.
    @discardableResult
    public func reportOpened(payload: PayloadValue, action: String? = nil, at date: Date = Date()) -> Bool {
        self.queueReceipt(Self.receiptID(in: payload), event: "opened", action: action, at: date)
    }

    /// Reports waiting to be sent.
    public var queuedReceipts: Int { self.receiptQueue.count }

    private func queueReceipt(_ receipt: String?, event: String, action: String?, at date: Date) -> Bool {
        guard let receipt, !receipt.isEmpty else { return false }
        self.receiptQueue.append(ReceiptItem(receipt: receipt, event: event, action: action, at: Int64(date.timeIntervalSince1970 * 1000)))
        return true
    }

    /// Sends the queued reports in batches of up to 500, with the register key. What the network
    /// or the server (429, 5xx) failed to take stays queued for the next flush (offline is
    /// normal); one Herald refuses for good is dropped. A device often reports before Herald
    /// has recorded the delivery (it does once APNs answers the whole batch): such reports are
    /// sent again, with back-off, for up to `patience`, then left to the next flushes (each
    /// report at most 10 times). Throws only what retrying cannot fix (a 4xx for the whole
    /// batch, such as a revoked key), or `CancellationError`.
    /// `patience` is in seconds (`.infinity`: until the task is cancelled).
    @discardableResult
    public func flushReceipts(patience: TimeInterval = 0) async throws -> ReceiptFlush {
        let end = patience.isFinite ? Date().addingTimeInterval(max(0, patience)) : nil
        var flush = try await self.flushReceiptsOnce()
        var wait: TimeInterval = 0.1
        while flush.queued > 0, flush.waiting > 0, end.map({ Date().addingTimeInterval(wait) < $0 }) ?? true {
            try await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000))
            wait = min(wait * 2, 2)
            let again = try await self.flushReceiptsOnce()
            flush.applied += again.applied
            flush.duplicates += again.duplicates
            flush.refused += again.refused
            flush.queued = again.queued
            flush.waiting = again.waiting
        }
        return flush
    }

    private func flushReceiptsOnce() async throws -> ReceiptFlush {
        var flush = ReceiptFlush()
        // Each entry is sent at most once per flush: a retried one waits for the next flush.
        var attempted = 0
        let total = self.receiptQueue.count
        while attempted < total {
            try Task.checkCancellation()
            guard let batch = self.receiptQueue.take(min(ReceiptBatch.limit, total - attempted)), !batch.isEmpty else { break }
            attempted += batch.count
            let answer: ReceiptBatchResponse
            do {
                answer = try await self.sendReceipts(ReceiptBatch(receipts: batch.map(\.item)))
            } catch {
                self.receiptQueue.release()
                if error is CancellationError { throw error }
                if let error = error as? HeraldKitError, !error.isRetryable { throw error }
                flush.queued = self.receiptQueue.count
                return flush
            }
            let retry = Set(answer.refused.filter { $0.code == "delivery_unknown" }.map(\.index))
            self.receiptQueue.finish(sent: batch, retry: retry)
            flush.applied += answer.applied
            flush.duplicates += answer.duplicates
            flush.refused += answer.refused.count - retry.count
            flush.waiting += retry.count
        }
        flush.queued = self.receiptQueue.count
        return flush
    }

    private func sendReceipts(_ batch: ReceiptBatch) async throws -> ReceiptBatchResponse {
        var request = URLRequest(url: self.serverURL.appendingPathComponent("/v1/apps/\(self.appID)/receipts"))
        request.httpMethod = "POST"
        request.timeoutInterval = 20
        request.setValue("Bearer \(self.key)", forHTTPHeaderField: "authorization")
        request.setValue("application/json", forHTTPHeaderField: "content-type")
        request.httpBody = try JSONEncoder().encode(batch)
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await self.session.data(for: request)
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw HeraldKitError(code: "network", status: nil, message: error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else { throw HeraldKitError(code: "bad_response", status: nil, message: "not HTTP") }
        guard (200..<300).contains(http.statusCode) else {
            let error = try? JSONDecoder().decode(APIErrorBody.self, from: data).error
            throw HeraldKitError(code: error?.code ?? "http_\(http.statusCode)", status: http.statusCode, message: error?.message ?? "")
        }
        guard let answer = try? JSONDecoder().decode(ReceiptBatchResponse.self, from: data) else {
            throw HeraldKitError(code: "bad_response", status: http.statusCode, message: "the answer is not a receipt batch's")
        }
        return answer
    }
}

extension NotificationServiceHandler {
    /// Queues "received" and sends the queue, giving up at the deadline (what is not sent stays
    /// queued, in the client's file when it has one).
    func reportReceived(_ payload: PayloadValue) async {
        guard let client = self.receipts, client.reportReceived(payload: payload) else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = try? await client.flushReceipts(patience: .infinity) }
            group.addTask { try? await self.sleepUntilDeadline() }
            _ = await group.next()
            group.cancelAll()
        }
    }
}
