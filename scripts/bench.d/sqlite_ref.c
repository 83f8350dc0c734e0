/*
 * Reference (b) of scripts/bench: the ceiling for writes (and reads) of the same rows.
 *
 * Uses the schema and pragmas of Sources/CouchStore/DatabaseSchema.swift (a `documents`
 * table with unique doc_id and sequence, journal_mode=WAL, synchronous=FULL,
 * foreign_keys=OFF) and inserts one row per document with the document body read from a
 * file, through one prepared statement, BATCH rows per transaction (BEGIN IMMEDIATE ...
 * COMMIT). BATCH=1000 is the batched write ceiling; BATCH=1 is the durable single-write
 * ceiling (one fsync'd commit per row). `scan` reads every row back in doc_id or sequence
 * order, the raw-storage ceiling of _all_docs and _changes: with the bodies
 * (_all_docs?include_docs=true) or only id, sequence, deleted flag and revision (_changes).
 *
 * Usage: sqlite_ref insert DB_PATH BODY_FILE COUNT BATCH MAX_SECONDS
 *        sqlite_ref scan DB_PATH doc_id|sequence bodies|metadata
 * Prints one JSON object: {"rows":N,"seconds":S,"rows_per_second":R,...}.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void check(sqlite3 *db, int code, const char *what) {
    if (code != SQLITE_OK && code != SQLITE_DONE && code != SQLITE_ROW) {
        fprintf(stderr, "sqlite_ref: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static void exec(sqlite3 *db, const char *sql) {
    char *message = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &message) != SQLITE_OK) {
        fprintf(stderr, "sqlite_ref: %s: %s\n", sql, message ? message : "?");
        exit(1);
    }
}

static sqlite3 *open_database(const char *path) {
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_ref: cannot open %s\n", path);
        exit(1);
    }
    exec(db, "PRAGMA journal_mode=WAL");
    exec(db, "PRAGMA synchronous=FULL");
    exec(db, "PRAGMA foreign_keys=OFF");
    return db;
}

static const char *schema =
    "CREATE TABLE IF NOT EXISTS metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS documents ("
    "  doc_key INTEGER PRIMARY KEY,"
    "  doc_id TEXT NOT NULL UNIQUE,"
    "  sequence INTEGER NOT NULL UNIQUE,"
    "  deleted INTEGER NOT NULL,"
    "  winning_rev TEXT NOT NULL,"
    "  body BLOB NOT NULL,"
    "  revision_tree BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS revision_bodies ("
    "  doc_key INTEGER NOT NULL, rev_id TEXT NOT NULL, body BLOB NOT NULL,"
    "  PRIMARY KEY (doc_key, rev_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS local_documents ("
    "  doc_id TEXT PRIMARY KEY, revision INTEGER NOT NULL, body BLOB NOT NULL) WITHOUT ROWID;";

static char *read_file(const char *path, long *size) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) { fprintf(stderr, "sqlite_ref: cannot read %s\n", path); exit(1); }
    fseek(file, 0, SEEK_END);
    *size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *bytes = malloc((size_t)*size + 1);
    if (fread(bytes, 1, (size_t)*size, file) != (size_t)*size) { fprintf(stderr, "short read\n"); exit(1); }
    fclose(file);
    return bytes;
}

static int insert(const char *path, const char *body_path, long count, long batch, double max_seconds) {
    long body_size = 0;
    char *body = read_file(body_path, &body_size);
    sqlite3 *db = open_database(path);
    exec(db, schema);
    sqlite3_stmt *statement = NULL;
    check(db, sqlite3_prepare_v2(db,
        "INSERT INTO documents (doc_id, sequence, deleted, winning_rev, body, revision_tree) "
        "VALUES (?, ?, 0, ?, ?, ?)", -1, &statement, NULL), "prepare");
    /* A revision tree of one leaf is a few dozen bytes in Couchette's encoding. */
    unsigned char tree[48];
    memset(tree, 7, sizeof(tree));
    char id[64], rev[64];
    long written = 0, commits = 0;
    double start = now_seconds(), elapsed = 0;
    while (written < count) {
        exec(db, "BEGIN IMMEDIATE");
        for (long i = 0; i < batch && written < count; i++, written++) {
            snprintf(id, sizeof(id), "bench-%07ld", written);
            snprintf(rev, sizeof(rev), "1-%032lx", (unsigned long)(written * 2654435761UL));
            sqlite3_bind_text(statement, 1, id, -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(statement, 2, written + 1);
            sqlite3_bind_text(statement, 3, rev, -1, SQLITE_TRANSIENT);
            sqlite3_bind_blob(statement, 4, body, (int)body_size, SQLITE_STATIC);
            sqlite3_bind_blob(statement, 5, tree, (int)sizeof(tree), SQLITE_STATIC);
            check(db, sqlite3_step(statement), "insert");
            sqlite3_reset(statement);
        }
        exec(db, "COMMIT");
        commits++;
        elapsed = now_seconds() - start;
        if (elapsed > max_seconds) break;  /* bounded in time as well as in count */
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    free(body);
    printf("{\"mode\":\"insert\",\"rows\":%ld,\"commits\":%ld,\"batch\":%ld,\"body_bytes\":%ld,"
           "\"seconds\":%.6f,\"rows_per_second\":%.1f}\n",
           written, commits, batch, body_size, elapsed, written / (elapsed > 0 ? elapsed : 1e-9));
    return 0;
}

static int scan(const char *path, const char *order, const char *columns) {
    int bodies = strcmp(columns, "bodies") == 0;
    if ((strcmp(order, "doc_id") != 0 && strcmp(order, "sequence") != 0)
        || (!bodies && strcmp(columns, "metadata") != 0)) {
        fprintf(stderr, "sqlite_ref: scan order must be doc_id or sequence, columns bodies or metadata\n");
        return 2;
    }
    sqlite3 *db = open_database(path);
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT doc_id, sequence, winning_rev, %s FROM documents ORDER BY %s",
             bodies ? "body" : "deleted", order);
    sqlite3_stmt *statement = NULL;
    double start = now_seconds();
    check(db, sqlite3_prepare_v2(db, sql, -1, &statement, NULL), "prepare");
    long rows = 0, bytes = 0;
    int code;
    while ((code = sqlite3_step(statement)) == SQLITE_ROW) {
        bytes += sqlite3_column_bytes(statement, 0) + sqlite3_column_bytes(statement, 2)
               + (long)(sqlite3_column_int64(statement, 1) & 1);
        if (bodies) {
            (void)sqlite3_column_blob(statement, 3);
            bytes += sqlite3_column_bytes(statement, 3);
        } else {
            bytes += sqlite3_column_int(statement, 3);
        }
        rows++;
    }
    check(db, code, "scan");
    double elapsed = now_seconds() - start;
    sqlite3_finalize(statement);
    sqlite3_close(db);
    printf("{\"mode\":\"scan\",\"order\":\"%s\",\"columns\":\"%s\",\"rows\":%ld,\"bytes\":%ld,\"seconds\":%.6f,"
           "\"rows_per_second\":%.1f}\n", order, columns, rows, bytes, elapsed, rows / (elapsed > 0 ? elapsed : 1e-9));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && strcmp(argv[1], "insert") == 0) {
        long count = atol(argv[4]), batch = atol(argv[5]);
        double max_seconds = atof(argv[6]);
        if (count <= 0 || batch <= 0 || max_seconds <= 0) { fprintf(stderr, "bad arguments\n"); return 2; }
        return insert(argv[2], argv[3], count, batch, max_seconds);
    }
    if (argc == 5 && strcmp(argv[1], "scan") == 0) return scan(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: %s insert DB_PATH BODY_FILE COUNT BATCH MAX_SECONDS\n"
                    "       %s scan DB_PATH doc_id|sequence bodies|metadata\n", argv[0], argv[0]);
    return 2;
}
