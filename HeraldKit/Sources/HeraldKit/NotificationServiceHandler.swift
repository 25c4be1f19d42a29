// SPDX-License-Identifier: Apache-2.0
public import Foundation

/// What a notification shows, platform-neutral: the parts of `UNMutableNotificationContent` a
/// notification service extension changes.
public struct NotificationContent: Sendable, Hashable {
    public struct Attachment: Sendable, Hashable {
        public var identifier: String
        public var url: URL
        public var data: Data

        public init(identifier: String, url: URL, data: Data) {
            self.identifier = identifier
            self.url = url
            self.data = data
        }
    }

    public var title: String
    public var subtitle: String
    public var body: String
    public var badge: Int?
    public var sound: String?
    public var threadID: String
    public var categoryID: String
    public var attachments: [Attachment]
    /// The payload (`userInfo`).
    public var payload: PayloadValue

    public init(
        title: String = "", subtitle: String = "", body: String = "", badge: Int? = nil, sound: String? = nil, threadID: String = "",
        categoryID: String = "", attachments: [Attachment] = [], payload: PayloadValue = .object([:])
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.badge = badge
        self.sound = sound
        self.threadID = threadID
        self.categoryID = categoryID
        self.attachments = attachments
        self.payload = payload
    }

    /// The content a notification's `userInfo` asks for, as `UNNotificationContent.userInfo`
    /// hands it over: what a service extension passes to ``NotificationServiceHandler/process(_:job:)``,
    /// so that a plain push keeps its badge, sound, thread and category, and an encrypted one
    /// gets them from the decrypted payload.
    public init(userInfo: [AnyHashable: Any]) throws {
        var object: [String: Any] = [:]
        for (key, value) in userInfo {
            guard let key = key as? String else { continue }
            object[key] = value
        }
        guard JSONSerialization.isValidJSONObject(object) else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "userInfo is not JSON"))
        }
        try self.init(payload: try JSONSerialization.data(withJSONObject: object))
    }

    /// The content a payload asks for (alert, badge, sound, thread, category).
    public init(payload data: Data) throws {
        let received = try ReceivedNotification(jsonData: data)
        self.init(
            title: received.alert?.title ?? "", subtitle: received.alert?.subtitle ?? "", body: received.alert?.body ?? "",
            badge: received.badge, sound: received.sound, threadID: received.threadID ?? "", categoryID: received.category ?? "",
            payload: received.payload
        )
    }
}

/// The platform-neutral core of a Notification Service Extension: decrypts an end-to-end
/// encrypted payload and fetches an attachment (the payload's `attachment-url`) within a
/// deadline, and returns exactly one content — the finished one, or at the deadline (or when the
/// system calls `serviceExtensionTimeWillExpire`, relayed by ``Job/expire()``) the best attempt
/// so far: decrypted without its attachment, or the placeholder the server sent.
///
/// ```swift
/// // In a UNNotificationServiceExtension (compiled on Apple platforms only):
/// var job: NotificationServiceHandler.Job?
/// override func didReceive(_ request: UNNotificationRequest, withContentHandler contentHandler: @escaping (UNNotificationContent) -> Void) {
///     let job = NotificationServiceHandler.Job()  // one per notification
///     self.job = job
///     Task {
///         let incoming = (try? NotificationContent(userInfo: request.content.userInfo)) ?? NotificationContent()
///         let content = await handler.process(incoming, job: job)
///         contentHandler(/* a UNMutableNotificationContent with every field of `content`: see AppleGlue */)
///     }
/// }
/// override func serviceExtensionTimeWillExpire() { self.job?.expire() }
/// ```
public struct NotificationServiceHandler: Sendable {
    /// Fetches an attachment's bytes (URLSession in an app; anything in a test). It must stop
    /// when its task is cancelled: the deadline cancels it.
    public typealias Loader = @Sendable (URL) async throws -> Data

    /// Sleeps until the deadline; throws when its task is cancelled.
    public typealias DeadlineSleeper = @Sendable () async throws -> Void

    public var privateKey: EncryptedPayload.PrivateKey?
    public var loader: Loader
    /// Reports each push received to Herald (its receipt id), within the deadline; nil: none.
    public var receipts: HeraldClient?
    /// Waits out the deadline (Apple gives an extension about 30 seconds; finish before).
    let sleepUntilDeadline: DeadlineSleeper

    /// A handler whose deadline is `deadline` seconds after ``process(_:job:)`` starts (iOS 15 on).
    public init(privateKey: EncryptedPayload.PrivateKey?, deadline: TimeInterval = 25, loader: @escaping Loader) {
        let nanoseconds = UInt64(max(0, deadline) * 1_000_000_000)
        self.init(privateKey: privateKey, sleeper: { try await Task.sleep(nanoseconds: nanoseconds) }, loader: loader)
    }

    /// A handler whose deadline is measured on `clock` (a test's manual clock, say).
    @available(macOS 13, iOS 16, watchOS 9, tvOS 16, *)
    public init<C: Clock>(privateKey: EncryptedPayload.PrivateKey?, deadline: Duration = .seconds(25), clock: C, loader: @escaping Loader)
    where C.Duration == Duration {
        self.init(privateKey: privateKey, sleeper: { try await clock.sleep(until: clock.now.advanced(by: deadline), tolerance: nil) }, loader: loader)
    }

    /// A handler whose deadline is whatever `sleeper` waits for.
    public init(privateKey: EncryptedPayload.PrivateKey?, sleeper: @escaping DeadlineSleeper, loader: @escaping Loader) {
        self.privateKey = privateKey
        self.sleepUntilDeadline = sleeper
        self.loader = loader
    }

    /// One notification being handled: the best attempt so far, and the system's "time is up".
    /// Make one per notification (per `didReceive`): once expired, it stays expired.
    public final class Job: Sendable {
        private let state = LockedBox<(best: NotificationContent?, expired: Bool, waiters: [Int: CheckedContinuation<Void, Never>], next: Int)>(
            (nil, false, [:], 0))

        public init() {}

        /// The system is about to kill the extension: ``NotificationServiceHandler/process(_:job:)``
        /// returns the best attempt now.
        public func expire() {
            let waiters = self.state.withLock { state in
                state.expired = true
                defer { state.waiters = [:] }
                return Array(state.waiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }

        var best: NotificationContent? { self.state.withLock { $0.best } }

        func improve(_ content: NotificationContent) {
            self.state.withLock { $0.best = content }
        }

        /// Returns when expired, or when the waiting task is cancelled.
        func expiry() async {
            let id = self.state.withLock { state in
                defer { state.next += 1 }
                return state.next
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = self.state.withLock { state -> Bool in
                        if state.expired || Task.isCancelled { return true }
                        state.waiters[id] = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume()
            }
        }
    }

    /// Handles `content`: the finished content, or the best attempt when the deadline passes or
    /// `job` expires first. Returns exactly once, and never later than the deadline (given a
    /// loader that stops when cancelled).
    public func process(_ content: NotificationContent, job: Job = Job()) async -> NotificationContent {
        job.improve(content)
        // The receipt goes out while the content is made; both end by the deadline.
        async let reported: Void = self.reportReceived(content.payload)
        let result = await withTaskGroup(of: NotificationContent?.self) { group in
            group.addTask { await self.transform(content, job: job) }
            group.addTask {
                try? await self.sleepUntilDeadline()
                return nil
            }
            group.addTask {
                await job.expiry()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? job.best ?? content
        }
        await reported
        return result
    }

    /// Decrypts, then fetches the attachment; every finished step becomes the best attempt.
    private func transform(_ original: NotificationContent, job: Job) async -> NotificationContent {
        var content = original
        if let envelope = original.payload[EncryptedPayload.key] {
            guard let key = self.privateKey, let opened = try? EncryptedPayload.open(envelope, with: key),
                var decrypted = try? NotificationContent(payload: opened)
            else {
                // Wrong key, tampered, truncated: the placeholder stays.
                return original
            }
            decrypted.attachments = original.attachments
            content = decrypted
            job.improve(content)
        }
        if let link = content.payload["attachment-url"]?.string, let url = URL(string: link), !Task.isCancelled {
            if let data = try? await self.loader(url), !Task.isCancelled {
                content.attachments.append(.init(identifier: url.lastPathComponent, url: url, data: data))
            }
        }
        return content
    }
}
