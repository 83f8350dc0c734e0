#include <sqlite3.h>

/* How many bytes of a statement journal (the pages a savepoint restores) SQLite keeps in
   memory before spilling it to a temporary file (SQLITE_CONFIG_STMTJRNL_SPILL; -1: never
   spilled). A wrapper because sqlite3_config is variadic, which Swift cannot call; effective
   only before the first connection opens. */
static inline int couchette_sqlite3_set_statement_journal_spill(int bytes) {
    return sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, bytes);
}

/* No page cache memory allocated in bulk when a connection first reads (SQLite allocates
   room for 20 pages, ~88 KB, up front by default): pages are allocated as they are read.
   Effective only before the first connection opens. */
static inline int couchette_sqlite3_allocate_pages_as_read(void) {
    return sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)0, 0, 0);
}

/* No count of the memory SQLite allocates (SQLITE_CONFIG_MEMSTATUS, on by default): keeping it
   takes one process-wide mutex around every allocation, which the threads reading different
   documents contended for. Nothing here asks SQLite for the count. Effective only before the
   first connection opens. */
static inline int couchette_sqlite3_count_no_memory(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* Whether closing the connection, when it is the database's last, leaves the write-ahead log
   as it is (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE) instead of checkpointing and deleting it.
   A wrapper because sqlite3_db_config is variadic. */
static inline int couchette_sqlite3_keep_log_on_close(sqlite3 *db, int keep) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, keep, (int *)0);
}
