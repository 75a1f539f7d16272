#include "csqlite.h"

int csqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}

int csqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
