#ifndef CSQLITE_H
#define CSQLITE_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer: Swift cannot import it,
// so these forwards bind text and blobs with SQLite copying the bytes.
int csqlite_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length);
int csqlite_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length);

#endif
