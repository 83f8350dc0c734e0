#include <sqlite3.h>

/* How many bytes of a statement journal (the pages a savepoint restores) SQLite keeps in
   memory before spilling it to a temporary file (SQLITE_CONFIG_STMTJRNL_SPILL; -1: never
   spilled). A wrapper because sqlite3_config is variadic, which Swift cannot call; effective
   only before the first connection opens. */
static inline int couchette_sqlite3_set_statement_journal_spill(int bytes) {
    return sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, bytes);
}
