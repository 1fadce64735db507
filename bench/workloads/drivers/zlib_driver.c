/* Deflates a file with zlib at levels 1, 6 and 9 (and once with Z_FILTERED), inflates each
 * result back through the streaming API in 64 KB pieces and checks it; argv[1] rounds over
 * argv[2]. Prints the compressed sizes, their Adler-32 and the CRC-32 of the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zlib.h"

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? n : 1);
  if (fread(buf, 1, n, f) != (size_t)n) { perror(path); exit(1); }
  fclose(f);
  *len = (size_t)n;
  return buf;
}

/* Deflates src with the given level and strategy into dst (of size cap), in 64 KB input pieces. */
static size_t deflate_buf(const unsigned char *src, size_t len, unsigned char *dst, size_t cap,
                          int level, int strategy) {
  z_stream s;
  memset(&s, 0, sizeof s);
  if (deflateInit2(&s, level, Z_DEFLATED, 15, 8, strategy) != Z_OK) exit(2);
  s.next_out = dst;
  s.avail_out = (uInt)cap;
  size_t pos = 0;
  int rc;
  do {
    size_t piece = len - pos < 65536 ? len - pos : 65536;
    s.next_in = (unsigned char *)src + pos;
    s.avail_in = (uInt)piece;
    pos += piece;
    rc = deflate(&s, pos == len ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_ERROR) exit(3);
  } while (rc != Z_STREAM_END);
  size_t out = s.total_out;
  deflateEnd(&s);
  return out;
}

/* Inflates src into dst in 64 KB output pieces; returns the decompressed size. */
static size_t inflate_buf(const unsigned char *src, size_t len, unsigned char *dst, size_t cap) {
  z_stream s;
  memset(&s, 0, sizeof s);
  if (inflateInit(&s) != Z_OK) exit(4);
  s.next_in = (unsigned char *)src;
  s.avail_in = (uInt)len;
  int rc;
  size_t pos = 0;
  do {
    size_t piece = cap - pos < 65536 ? cap - pos : 65536;
    s.next_out = dst + pos;
    s.avail_out = (uInt)piece;
    rc = inflate(&s, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) { fprintf(stderr, "inflate: %d\n", rc); exit(5); }
    pos = s.total_out;
  } while (rc != Z_STREAM_END);
  inflateEnd(&s);
  return pos;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: zlib ROUNDS FILE\n"); return 2; }
  int rounds = atoi(argv[1]);
  size_t len;
  unsigned char *src = read_file(argv[2], &len);
  size_t cap = compressBound(len);
  unsigned char *dst = malloc(cap), *back = malloc(len + 1);
  static const struct { int level, strategy; const char *name; } runs[] = {
    {1, Z_DEFAULT_STRATEGY, "level 1"}, {6, Z_DEFAULT_STRATEGY, "level 6"},
    {9, Z_DEFAULT_STRATEGY, "level 9"}, {6, Z_FILTERED, "filtered"}};
  size_t sizes[4];
  unsigned long sums[4];
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 4; k++) {
      size_t c = deflate_buf(src, len, dst, cap, runs[k].level, runs[k].strategy);
      size_t d = inflate_buf(dst, c, back, len + 1);
      if (d != len || memcmp(src, back, len)) { fprintf(stderr, "roundtrip failed\n"); return 1; }
      sizes[k] = c;
      sums[k] = adler32(adler32(0, Z_NULL, 0), dst, (uInt)c);
    }
  }
  printf("zlib %s: %zu bytes, crc32 %08lx\n", zlibVersion(), len,
         crc32(crc32(0, Z_NULL, 0), src, (uInt)len));
  for (int k = 0; k < 4; k++) printf("  %-8s -> %zu bytes, adler32 %08lx\n", runs[k].name, sizes[k], sums[k]);
  return 0;
}
