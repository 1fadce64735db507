/* SQLite in phases, scaled by argv[1]: bulk inserts, then indexed point queries, then
   updates through the index, then full-scan aggregates. Each phase runs long enough to
   span many profile intervals. */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static void exec(sqlite3 *db, const char *sql) {
  char *err = 0;
  if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
    fprintf(stderr, "sql error: %s\n", err);
    exit(1);
  }
}

static unsigned seed = 42;
static unsigned next(void) { seed = seed * 1103515245u + 12345u; return seed >> 4; }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  int rows = 20000 * n;
  sqlite3 *db;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) { fprintf(stderr, "open failed\n"); return 1; }
  exec(db, "CREATE TABLE t(a INTEGER PRIMARY KEY, k INTEGER, name TEXT, v REAL);");
  /* Phase 1: inserts. */
  sqlite3_stmt *ins;
  sqlite3_prepare_v2(db, "INSERT INTO t(k, name, v) VALUES (?, ?, ?)", -1, &ins, 0);
  exec(db, "BEGIN");
  for (int i = 0; i < rows; i++) {
    char buf[32];
    unsigned r = next();
    snprintf(buf, sizeof buf, "n%u-%u", r % 9973, i);
    sqlite3_bind_int(ins, 1, (int)(r % (unsigned)rows));
    sqlite3_bind_text(ins, 2, buf, -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(ins, 3, (r % 10000) / 7.0);
    sqlite3_step(ins);
    sqlite3_reset(ins);
  }
  exec(db, "COMMIT");
  sqlite3_finalize(ins);
  exec(db, "CREATE INDEX tk ON t(k);");
  /* Phase 2: indexed point queries. */
  sqlite3_stmt *q;
  sqlite3_prepare_v2(db, "SELECT count(*), sum(v) FROM t WHERE k = ?", -1, &q, 0);
  double total = 0;
  for (int i = 0; i < 3 * rows; i++) {
    sqlite3_bind_int(q, 1, (int)(next() % (unsigned)rows));
    if (sqlite3_step(q) == SQLITE_ROW) total += sqlite3_column_double(q, 1);
    sqlite3_reset(q);
  }
  sqlite3_finalize(q);
  printf("queries: %.1f\n", total);
  /* Phase 3: updates through the index. */
  sqlite3_stmt *up;
  sqlite3_prepare_v2(db, "UPDATE t SET v = v * 1.5 + 1, name = name || 'x' WHERE k = ?", -1, &up, 0);
  exec(db, "BEGIN");
  for (int i = 0; i < rows; i++) {
    sqlite3_bind_int(up, 1, (int)(next() % (unsigned)rows));
    sqlite3_step(up);
    sqlite3_reset(up);
  }
  exec(db, "COMMIT");
  sqlite3_finalize(up);
  /* Phase 4: full-scan aggregates and sorting. */
  sqlite3_stmt *agg;
  sqlite3_prepare_v2(db, "SELECT k % 97, count(*), round(avg(v), 3), max(name) FROM t GROUP BY 1 ORDER BY 3 DESC LIMIT 1", -1, &agg, 0);
  for (int i = 0; i < 4 + n; i++) {
    if (sqlite3_step(agg) == SQLITE_ROW && i == 0)
      printf("top group %d: %d rows, avg %s\n", sqlite3_column_int(agg, 0), sqlite3_column_int(agg, 1), sqlite3_column_text(agg, 2));
    sqlite3_reset(agg);
  }
  sqlite3_finalize(agg);
  sqlite3_close(db);
  return 0;
}
