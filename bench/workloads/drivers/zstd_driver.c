/* Compresses and decompresses generated text at several levels with zstd, scaled by argv[1]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zstd.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  size_t size = (size_t)n * 1000000;
  char *src = malloc(size);
  static const char *words[] = {"profile", "path", "edge", "wasm", "sample", "loop", "branch",
                                "header", "counter", "the", "of", "and", "register", "yield"};
  unsigned seed = 7;
  size_t pos = 0;
  while (pos < size) {
    seed = seed * 1103515245u + 12345u;
    const char *w = words[(seed >> 16) % 14];
    size_t l = strlen(w);
    for (size_t i = 0; i < l && pos < size; i++) src[pos++] = w[i];
    if (pos < size) src[pos++] = (seed >> 8) % 11 == 0 ? '\n' : ' ';
  }
  size_t cap = ZSTD_compressBound(size);
  char *dst = malloc(cap), *back = malloc(size);
  int levels[] = {1, 3, 9};
  for (int k = 0; k < 3; k++) {
    size_t c = ZSTD_compress(dst, cap, src, size, levels[k]);
    if (ZSTD_isError(c)) { fprintf(stderr, "%s\n", ZSTD_getErrorName(c)); return 1; }
    size_t d = ZSTD_decompress(back, size, dst, c);
    if (ZSTD_isError(d) || d != size || memcmp(src, back, size)) { fprintf(stderr, "roundtrip failed\n"); return 1; }
    unsigned sum = 0;
    for (size_t i = 0; i < c; i++) sum = sum * 31 + (unsigned char)dst[i];
    printf("zstd level %d: %zu -> %zu bytes, checksum %08x\n", levels[k], size, c, sum);
  }
  return 0;
}
