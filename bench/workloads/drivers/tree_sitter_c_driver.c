/* Parses a generated C source file (argv[2]) with tree-sitter and its C grammar argv[1] times,
 * then walks each syntax tree with a cursor. The grammar's parser.c is a generated table-driven
 * parser whose lexer is one large switch. Prints node counts, depth, errors and a checksum of
 * the node kinds and byte ranges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tree_sitter/api.h"

const TSLanguage *tree_sitter_c(void);

struct stats { unsigned long nodes, named, errors, max_depth, sum; };

static void walk(TSTree *tree, struct stats *st) {
  TSTreeCursor c = ts_tree_cursor_new(ts_tree_root_node(tree));
  unsigned long depth = 0;
  for (;;) {
    TSNode n = ts_tree_cursor_current_node(&c);
    st->nodes++;
    if (ts_node_is_named(n)) st->named++;
    if (ts_node_is_error(n) || ts_node_is_missing(n)) st->errors++;
    if (depth > st->max_depth) st->max_depth = depth;
    st->sum = st->sum * 1000003u + ts_node_symbol(n) * 31u + ts_node_start_byte(n) + ts_node_end_byte(n);
    if (ts_tree_cursor_goto_first_child(&c)) { depth++; continue; }
    while (!ts_tree_cursor_goto_next_sibling(&c)) {
      if (!ts_tree_cursor_goto_parent(&c)) { ts_tree_cursor_delete(&c); return; }
      depth--;
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: tree-sitter-c ROUNDS FILE\n"); return 2; }
  int rounds = atoi(argv[1]);
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 1; }
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *src = malloc(len);
  if (fread(src, 1, len, f) != len) { perror(argv[2]); return 1; }
  fclose(f);

  TSParser *parser = ts_parser_new();
  if (!ts_parser_set_language(parser, tree_sitter_c())) { fprintf(stderr, "language version\n"); return 1; }
  struct stats st;
  for (int r = 0; r < rounds; r++) {
    memset(&st, 0, sizeof st);
    TSTree *tree = ts_parser_parse_string(parser, NULL, src, (uint32_t)len);
    if (!tree) { fprintf(stderr, "parse failed\n"); return 1; }
    walk(tree, &st);
    ts_tree_delete(tree);
  }
  ts_parser_delete(parser);
  printf("tree-sitter-c: %zu bytes, %lu nodes (%lu named), depth %lu, %lu errors, checksum %08lx\n",
         len, st.nodes, st.named, st.max_depth, st.errors, st.sum & 0xffffffffUL);
  return 0;
}
