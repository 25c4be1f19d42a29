// SPDX-License-Identifier: Apache-2.0
//
// SQLite's own cost of Herald's hottest statements, in C with nothing around them: the floor
// under what herald spends per registration and per delivery (Benchmarks/floor.sh). Runs on a
// copy of a database that `herald serve` made, so the schema, the indexes and the table sizes
// are Herald's; the SQL mirrors Sources/HeraldSQLite (the statements, not Swift's wrapping).
//
//   sqlite-floor register   DB APP N   N registrations of new random tokens, 64 a transaction,
//                                      each in a SAVEPOINT: the device's SELECT, then the upsert
//                                      RETURNING its columns (SQLiteStore.register, grouped).
//   sqlite-floor deliveries DB APP N   N delivery rows of one notification, 1,024 a transaction,
//                                      in INSERTs of 64 rows (SQLiteStore.insertDeliveries).
//   sqlite-floor chunk      DB APP N   N deliveries recorded as chunk rows of 1,000 (not Herald's
//                                      model today: what recording a chunk's outcomes as one row
//                                      would cost): the chunk's device ids (8 bytes each) and
//                                      apns-ids (16 bytes each) as blobs, one row a transaction.
//   sqlite-floor narrow     DB APP N   as `deliveries`, into a narrower row (not Herald's model
//                                      today): no token, environment, push type or topic (the
//                                      device's and the notification's), the apns-id as 16 bytes,
//                                      the same unique (notification, device) index.
//   sqlite-floor expand     DB APP N   N listed devices read for their chunk, 1,000 a statement
//                                      (SQLiteStore.chunkDevices over a resolved list's ids).
//   sqlite-floor lookup     DB APP N   N registered tokens looked up, 1,000 a statement
//                                      (the token list's lookup at acceptance).
//   sqlite-floor lookup-busy DB APP N  the same lookups on a second connection while the first
//                                      commits a write between any two of them, as the engine's
//                                      records do between acceptances: each read transaction
//                                      then finds the database changed and starts from an empty
//                                      page cache.
//
// Prints "RESULT what=<mode> n=<N> us=<CPU µs each>". The writer's settings are Herald's: WAL,
// synchronous NORMAL, a 16 MiB cache, and a checkpoint every 10,000 WAL pages (here inline; in
// herald on a thread of its own, which costs the same CPU).
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static sqlite3 *db;

static void check(int status, const char *what) {
    if (status != SQLITE_OK && status != SQLITE_DONE && status != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static void exec(const char *sql) { check(sqlite3_exec(db, sql, NULL, NULL, NULL), sql); }

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *statement = NULL;
    check(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), sql);
    return statement;
}

static void run(sqlite3_stmt *statement) {
    int status;
    while ((status = sqlite3_step(statement)) == SQLITE_ROW) {}
    check(status, sqlite3_sql(statement));
    sqlite3_reset(statement);
}

static void random_hex(char *out, int length) {
    for (int i = 0; i < length; i++) out[i] = "0123456789abcdef"[rand() & 15];
    out[length] = 0;
}

static const char *upsert =
    "INSERT INTO devices (app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform, "
    "activity_id, attributes_type, active, created_at, last_registered_at, public_key, public_key_type) "
    "VALUES (?1, ?2, 'device', 'production', NULL, 'en_US', 'Europe/Paris', '1.0', 'iOS', NULL, NULL, 1, ?3, ?3, NULL, NULL) "
    "ON CONFLICT (app_id, token) DO UPDATE SET kind = excluded.kind, environment = excluded.environment, "
    "user_id = excluded.user_id, locale = excluded.locale, time_zone = excluded.time_zone, "
    "app_version = excluded.app_version, platform = excluded.platform, activity_id = excluded.activity_id, "
    "attributes_type = excluded.attributes_type, active = 1, public_key = excluded.public_key, "
    "public_key_type = excluded.public_key_type, "
    "last_registered_at = excluded.last_registered_at, invalidated_at = NULL, invalidation_reason = NULL "
    "RETURNING id, app_id, token, kind, environment, user_id, locale, time_zone, app_version, platform, activity_id, "
    "attributes_type, active, created_at, last_registered_at, invalidated_at, invalidation_reason, public_key, public_key_type";

static double registrations(const char *app, int n) {
    sqlite3_stmt *savepoint = prepare("SAVEPOINT grouped_write"), *release = prepare("RELEASE grouped_write");
    sqlite3_stmt *select = prepare("SELECT id, user_id FROM devices WHERE app_id = ? AND token = ?");
    sqlite3_stmt *insert = prepare(upsert);
    char token[65];
    double start = cpu_seconds();
    for (int done = 0; done < n;) {
        exec("BEGIN IMMEDIATE");
        for (int i = 0; i < 64 && done < n; i++, done++) {
            random_hex(token, 64);
            run(savepoint);
            sqlite3_bind_text(select, 1, app, -1, SQLITE_STATIC);
            sqlite3_bind_text(select, 2, token, 64, SQLITE_STATIC);
            run(select);
            sqlite3_bind_text(insert, 1, app, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 2, token, 64, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 3, 1700000000000LL);
            run(insert);
            run(release);
        }
        exec("COMMIT");
    }
    return (cpu_seconds() - start) / n;
}

#define ROWS 64

// A notification of the app's, made here, that the rows belong to (the foreign key).
static void own_notification(const char *app, char notification[37]) {
    random_hex(notification, 36);
    sqlite3_stmt *make = prepare(
        "INSERT INTO notifications (id, app_id, payload, created_at, scheduled_at) VALUES (?1, ?2, x'7b7d', 0, 0)");
    sqlite3_bind_text(make, 1, notification, -1, SQLITE_STATIC);
    sqlite3_bind_text(make, 2, app, -1, SQLITE_STATIC);
    run(make);
    sqlite3_finalize(make);
}

// `head` (an INSERT up to VALUES) with ROWS rows of `columns` parameters each, as Herald writes a
// chunk's rows.
static sqlite3_stmt *rows_insert(const char *head, int columns) {
    char sql[16384];
    int at = snprintf(sql, sizeof sql, "%s", head);
    for (int row = 0; row < ROWS; row++) {
        at += snprintf(sql + at, sizeof sql - at, row ? ", (" : "(");
        for (int column = 1; column <= columns; column++)
            at += snprintf(sql + at, sizeof sql - at, column < columns ? "?%d, " : "?%d)", row * columns + column);
    }
    return prepare(sql);
}

// Binds one row at parameter offset `p`: delivery `id` of `notification`.
typedef void (*bind_row)(sqlite3_stmt *insert, int p, int row, sqlite3_int64 id, const char *notification);

// N rows through `insert`, ~1,000 a transaction; the CPU per row.
static double insert_rows(int n, sqlite3_stmt *insert, int columns, bind_row bind, const char *notification, sqlite3_int64 first_id) {
    sqlite3_int64 id = first_id;
    double start = cpu_seconds();
    int done = 0;
    while (done < n) {
        exec("BEGIN IMMEDIATE");
        for (int batch = 0; batch < 1000 / ROWS + 1 && done < n; batch++, done += ROWS) {
            for (int row = 0; row < ROWS; row++, id++) bind(insert, row * columns, row, id, notification);
            run(insert);
        }
        exec("COMMIT");
    }
    return (cpu_seconds() - start) / done;
}

static char tokens[ROWS][65], apns_texts[ROWS][37];
static unsigned char apns_bytes[ROWS][16];

// Herald's row: 15 columns.
static void bind_delivery(sqlite3_stmt *insert, int p, int row, sqlite3_int64 id, const char *notification) {
    random_hex(tokens[row], 64);
    random_hex(apns_texts[row], 36);
    sqlite3_bind_int64(insert, p + 1, id);
    sqlite3_bind_text(insert, p + 2, notification, 36, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 3, id);
    sqlite3_bind_text(insert, p + 4, tokens[row], 64, SQLITE_STATIC);
    sqlite3_bind_text(insert, p + 5, "production", -1, SQLITE_STATIC);
    sqlite3_bind_text(insert, p + 6, "alert", -1, SQLITE_STATIC);
    sqlite3_bind_text(insert, p + 7, "com.example.app", -1, SQLITE_STATIC);
    sqlite3_bind_text(insert, p + 8, "sent", -1, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 9, 1);
    sqlite3_bind_int64(insert, p + 10, 1700000000000LL);
    sqlite3_bind_text(insert, p + 11, apns_texts[row], 36, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 12, 200);
    sqlite3_bind_null(insert, p + 13);
    sqlite3_bind_int64(insert, p + 14, 3);
    sqlite3_bind_int64(insert, p + 15, 1700000000000LL);
}

static double deliveries(const char *app, int n) {
    char notification[37];
    own_notification(app, notification);
    sqlite3_int64 first_id = 1;
    sqlite3_stmt *max = prepare("SELECT coalesce(max(id), 0) + 1 FROM deliveries");
    if (sqlite3_step(max) == SQLITE_ROW) first_id = sqlite3_column_int64(max, 0);
    sqlite3_finalize(max);
    // INSERT OR IGNORE … VALUES (?1, …, ?15), … (64 rows).
    sqlite3_stmt *insert = rows_insert(
        "INSERT OR IGNORE INTO deliveries (id, notification_id, device_id, token, environment, push_type, topic, state, "
        "attempts, next_attempt_at, apns_id, status, reason, latency_ms, updated_at) VALUES ", 15);
    return insert_rows(n, insert, 15, bind_delivery, notification, first_id);
}

static double chunks(const char *app, int n) {
    exec("CREATE TABLE IF NOT EXISTS floor_chunk_outcomes (id INTEGER PRIMARY KEY, notification_id TEXT NOT NULL, "
         "first_delivery INTEGER NOT NULL, devices BLOB NOT NULL, apns_ids BLOB NOT NULL, updated_at INTEGER NOT NULL); "
         "CREATE INDEX IF NOT EXISTS floor_chunk_outcomes_notification ON floor_chunk_outcomes (notification_id)");
    char notification[37];
    random_hex(notification, 36);
    sqlite3_stmt *insert = prepare(
        "INSERT INTO floor_chunk_outcomes (notification_id, first_delivery, devices, apns_ids, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)");
    static unsigned char devices[1000 * 8], apns_ids[1000 * 16];
    double start = cpu_seconds();
    int done = 0;
    while (done < n) {
        for (int i = 0; i < (int)sizeof devices; i++) devices[i] = rand();
        for (int i = 0; i < (int)sizeof apns_ids; i++) apns_ids[i] = rand();
        exec("BEGIN IMMEDIATE");
        sqlite3_bind_text(insert, 1, notification, 36, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 2, done + 1);
        sqlite3_bind_blob(insert, 3, devices, sizeof devices, SQLITE_STATIC);
        sqlite3_bind_blob(insert, 4, apns_ids, sizeof apns_ids, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 5, 1700000000000LL);
        run(insert);
        exec("COMMIT");
        done += 1000;
    }
    return (cpu_seconds() - start) / done;
}

// The narrower row: 11 columns.
static void bind_narrow(sqlite3_stmt *insert, int p, int row, sqlite3_int64 id, const char *notification) {
    for (int i = 0; i < 16; i++) apns_bytes[row][i] = rand();
    sqlite3_bind_int64(insert, p + 1, id);
    sqlite3_bind_text(insert, p + 2, notification, 36, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 3, id);
    sqlite3_bind_text(insert, p + 4, "sent", -1, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 5, 1);
    sqlite3_bind_int64(insert, p + 6, 1700000000000LL);
    sqlite3_bind_blob(insert, p + 7, apns_bytes[row], 16, SQLITE_STATIC);
    sqlite3_bind_int64(insert, p + 8, 200);
    sqlite3_bind_null(insert, p + 9);
    sqlite3_bind_int64(insert, p + 10, 3);
    sqlite3_bind_int64(insert, p + 11, 1700000000000LL);
}

static double narrow(const char *app, int n) {
    exec("CREATE TABLE IF NOT EXISTS floor_narrow (id INTEGER PRIMARY KEY, "
         "notification_id TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE, device_id INTEGER NOT NULL, "
         "state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER NOT NULL, apns_id BLOB, "
         "status INTEGER, reason TEXT, latency_ms INTEGER, updated_at INTEGER NOT NULL); "
         "CREATE UNIQUE INDEX IF NOT EXISTS floor_narrow_notification ON floor_narrow (notification_id, device_id)");
    char notification[37];
    own_notification(app, notification);
    sqlite3_stmt *insert = rows_insert(
        "INSERT OR IGNORE INTO floor_narrow (id, notification_id, device_id, state, attempts, next_attempt_at, apns_id, "
        "status, reason, latency_ms, updated_at) VALUES ", 11);
    return insert_rows(n, insert, 11, bind_narrow, notification, 1);
}

static double expands(const char *app, int n) {
    // 1,000 of the app's devices, their ids sorted, as a JSON array (a resolved list's `device_ids`).
    sqlite3_stmt *pick = prepare("SELECT id FROM (SELECT id FROM devices WHERE app_id = ? ORDER BY random() LIMIT 1000) ORDER BY id");
    sqlite3_bind_text(pick, 1, app, -1, SQLITE_STATIC);
    char *list = malloc(1000 * 24 + 3);
    int at = 0, count = 0;
    list[at++] = '[';
    while (sqlite3_step(pick) == SQLITE_ROW) at += sprintf(list + at, count++ ? ",%lld" : "%lld", sqlite3_column_int64(pick, 0));
    list[at++] = ']';
    list[at] = 0;
    sqlite3_finalize(pick);
    if (count == 0) {
        fprintf(stderr, "no devices of app %s\n", app);
        exit(1);
    }
    sqlite3_stmt *expand = prepare(
        "SELECT d.id, d.token, d.environment, "
        "CASE d.kind WHEN 'device' THEN 'alert' WHEN 'voip' THEN 'voip' ELSE 'liveactivity' END, "
        "CASE d.kind WHEN 'device' THEN ?1 WHEN 'voip' THEN ?1 || '.voip' ELSE ?1 || '.push-type.liveactivity' END "
        "FROM devices d WHERE +d.app_id = ?2 AND d.active = 1 AND +d.id > ?3 AND +d.id <= ?4 "
        "AND d.id IN (SELECT value FROM json_each(?5)) ORDER BY d.id LIMIT 1000");
    double start = cpu_seconds();
    int done = 0;
    while (done < n) {
        exec("BEGIN");
        sqlite3_bind_text(expand, 1, "com.example.app", -1, SQLITE_STATIC);
        sqlite3_bind_text(expand, 2, app, -1, SQLITE_STATIC);
        sqlite3_bind_int64(expand, 3, 0);
        sqlite3_bind_int64(expand, 4, 1LL << 62);
        sqlite3_bind_text(expand, 5, list, at, SQLITE_STATIC);
        run(expand);
        exec("COMMIT");
        done += count;
    }
    free(list);
    return (cpu_seconds() - start) / done;
}

static double lookups(const char *app, int n, int busy) {
    // Tokens that are registered, in random order, 1,000 a JSON array.
    sqlite3_stmt *pick = prepare("SELECT token FROM devices WHERE app_id = ? ORDER BY random() LIMIT 1000");
    sqlite3_bind_text(pick, 1, app, -1, SQLITE_STATIC);
    char *list = malloc(1000 * 67 + 3);
    int at = 0, count = 0;
    list[at++] = '[';
    while (sqlite3_step(pick) == SQLITE_ROW) {
        at += sprintf(list + at, count++ ? ",\"%s\"" : "\"%s\"", (const char *)sqlite3_column_text(pick, 0));
    }
    list[at++] = ']';
    list[at] = 0;
    sqlite3_finalize(pick);
    if (count == 0) {
        fprintf(stderr, "no devices of app %s\n", app);
        exit(1);
    }
    // With `busy`, the lookups run on a connection of their own and this one writes between them.
    sqlite3 *writer = db, *reader = db;
    sqlite3_stmt *write = NULL;
    if (busy) {
        check(sqlite3_open_v2(sqlite3_db_filename(db, "main"), &reader, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL), "open reader");
        exec("CREATE TABLE IF NOT EXISTS floor_writes (at INTEGER)");
        write = prepare("INSERT INTO floor_writes VALUES (1)");
        db = reader;
    }
    sqlite3_stmt *lookup = prepare(
        "SELECT d.id, EXISTS (SELECT 1 FROM devices i INDEXED BY devices_inactive "
        "WHERE i.app_id = ?1 AND i.token = t.value AND i.active = 0), (d.id <= ?2) "
        "FROM json_each(?3) t LEFT JOIN devices d ON d.app_id = ?1 AND d.token = t.value");
    double start = cpu_seconds();
    int done = 0;
    while (done < n) {
        if (write) {
            db = writer;
            run(write);
            db = reader;
        }
        exec("BEGIN");
        sqlite3_bind_text(lookup, 1, app, -1, SQLITE_STATIC);
        sqlite3_bind_int64(lookup, 2, 1LL << 62);
        sqlite3_bind_text(lookup, 3, list, at, SQLITE_STATIC);
        run(lookup);
        exec("COMMIT");
        done += count;
    }
    double each = (cpu_seconds() - start) / done;
    free(list);
    db = writer;
    return each;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s register|deliveries|narrow|chunk|expand|lookup|lookup-busy DB APP N\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *app = argv[3];
    int n = atoi(argv[4]);
    srand(1);
    check(sqlite3_open_v2(argv[2], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL), "open");
    exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -16384; "
         "PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 10000");
    double each;
    if (strcmp(mode, "register") == 0) each = registrations(app, n);
    else if (strcmp(mode, "deliveries") == 0) each = deliveries(app, n);
    else if (strcmp(mode, "chunk") == 0) each = chunks(app, n);
    else if (strcmp(mode, "narrow") == 0) each = narrow(app, n);
    else if (strcmp(mode, "expand") == 0) each = expands(app, n);
    else if (strcmp(mode, "lookup") == 0) each = lookups(app, n, 0);
    else if (strcmp(mode, "lookup-busy") == 0) each = lookups(app, n, 1);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    printf("RESULT what=%s n=%d us=%.2f\n", mode, n, each * 1e6);
    sqlite3_close(db);
    return 0;
}
