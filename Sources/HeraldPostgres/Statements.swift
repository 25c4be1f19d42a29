// SPDX-License-Identifier: Apache-2.0
import HeraldCore

/// The statements a batch runs every time, prepared once per connection (`FixedStatement`):
/// lookups by key, whose plan does not depend on how many rows a table holds. A statement that
/// picks by range (the due deliveries, the next notification to expand) is planned at each call.
enum Statements {
    /// What the deliveries of notifications $1 share.
    enum SharedColumns: FixedStatement {
        static let sql = "SELECT id, \(NotificationShared.columns) FROM notifications WHERE id = ANY($1)"
    }

    /// The chunk whose lease ran out first by $1, with its notification.
    enum ExpiredChunk: FixedStatement {
        static let sql = """
            SELECT c.id, c.notification_id, c.after_id, c.through_id, c.attempts, n.id, n.bundle_id, n.targeting, n.device_ids IS NOT NULL,
                n.push_type, n.cancelled_at, \(NotificationShared.columns)
            FROM delivery_chunks c LEFT JOIN notifications n ON n.id = c.notification_id
            WHERE c.lease_until <= $1 ORDER BY c.lease_until, c.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED
            """
    }

    /// A new chunk: notification $1, devices after $2 through $3, $4 of them, at attempt $5, leased until $6.
    enum NewChunk: FixedStatement {
        static let sql = """
            INSERT INTO delivery_chunks (notification_id, after_id, through_id, size, attempts, lease_until) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
            """
    }

    /// Where notification $2's expansion goes on: after device $1 (NULL: done).
    enum ExpandAfter: FixedStatement {
        static let sql = "UPDATE notifications SET expand_after = $1 WHERE id = $2"
    }

    /// Chunks $1 locked, with their attempts.
    enum LockChunks: FixedStatement {
        static let sql = "SELECT id, attempts FROM delivery_chunks WHERE id = ANY($1) ORDER BY id FOR UPDATE"
    }

    /// $1 deliveries of chunk $2 that have their rows now leave it, at attempt $3 (NULL: at
    /// whatever attempt it is).
    enum LeaveChunk: FixedStatement {
        static let sql = "UPDATE delivery_chunks SET size = size - $1 WHERE id = $2 AND ($3::bigint IS NULL OR attempts = $3)"
    }

    /// Chunk $1 (at attempt $2; NULL: any), with no delivery left without a row, is done.
    enum EndRecordedChunk: FixedStatement {
        static let sql = "DELETE FROM delivery_chunks WHERE id = $1 AND ($2::bigint IS NULL OR attempts = $2) AND size <= 0"
    }
}
