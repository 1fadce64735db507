/* An in-memory SQLite workload: inserts, an index, joins, aggregates and sorting, scaled by argv[1]. */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static int print_row(void *u, int n, char **vals, char **cols) {
  (void)u; (void)cols;
  for (int i = 0; i < n; i++) printf("%s%s", i ? "|" : "", vals[i] ? vals[i] : "NULL");
  printf("\n");
  return 0;
}

static void exec(sqlite3 *db, const char *sql) {
  char *err = 0;
  if (sqlite3_exec(db, sql, print_row, 0, &err) != SQLITE_OK) {
    fprintf(stderr, "sql error: %s\n", err);
    exit(1);
  }
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) { fprintf(stderr, "open failed\n"); return 1; }
  exec(db, "PRAGMA journal_mode=MEMORY; CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL, d INTEGER);"
           "CREATE TABLE u(k INTEGER, name TEXT);");
  sqlite3_stmt *ins;
  sqlite3_prepare_v2(db, "INSERT INTO t(b, c, d) VALUES (?, ?, ?)", -1, &ins, 0);
  unsigned seed = 42;
  exec(db, "BEGIN");
  for (int i = 0; i < 4000 * n; i++) {
    char buf[32];
    seed = seed * 1103515245u + 12345u;
    snprintf(buf, sizeof buf, "%c%c-%u", 'a' + (seed >> 16) % 26, 'a' + (seed >> 8) % 26, (seed >> 4) % 1000);
    sqlite3_bind_text(ins, 1, buf, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(ins, 2, (seed % 10000) / 7.0);
    sqlite3_bind_int(ins, 3, (int)(seed % 97));
    sqlite3_step(ins);
    sqlite3_reset(ins);
  }
  exec(db, "COMMIT");
  sqlite3_finalize(ins);
  exec(db, "INSERT INTO u SELECT d, 'name' || d FROM t GROUP BY d;");
  exec(db, "CREATE INDEX tb ON t(b); CREATE INDEX td ON t(d);");
  exec(db, "SELECT count(*), round(sum(c), 2) FROM t WHERE b LIKE 'q%';");
  exec(db, "SELECT d, count(*), round(avg(c), 3) FROM t GROUP BY d ORDER BY count(*) DESC, d LIMIT 5;");
  exec(db, "SELECT u.name, count(*) FROM t JOIN u ON t.d = u.k WHERE t.c > 500 GROUP BY u.name ORDER BY 2 DESC, 1 LIMIT 3;");
  exec(db, "SELECT b FROM t ORDER BY b DESC, a LIMIT 3;");
  exec(db, "UPDATE t SET c = c * 2 WHERE d % 3 = 0; DELETE FROM t WHERE d % 5 = 0;");
  exec(db, "SELECT count(*), round(sum(c), 2), max(b), min(b) FROM t;");
  sqlite3_close(db);
  return 0;
}
