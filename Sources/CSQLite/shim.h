// SPDX-License-Identifier: Apache-2.0
#include <sqlite3.h>

/// Turns off SQLite's memory statistics, which take a process-wide mutex on every allocation
/// (Herald reads none of them). `sqlite3_config` is variadic, which Swift cannot call, and takes
/// effect only before the library's first use: SQLITE_MISUSE after it.
static inline int herald_sqlite3_memory_statistics_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
