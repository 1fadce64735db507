/* Compresses a file with liblzma (xz format, CRC-64 check) at preset argv[1] and decompresses
 * it again with the streaming decoder in 64 KB pieces, checking the round trip. Prints the
 * compressed size and a checksum of the compressed bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lzma.h"

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: xz PRESET FILE\n"); return 2; }
  uint32_t preset = (uint32_t)atoi(argv[1]);
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 1; }
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *src = malloc(len);
  if (fread(src, 1, len, f) != len) { perror(argv[2]); return 1; }
  fclose(f);

  size_t cap = lzma_stream_buffer_bound(len), clen = 0;
  uint8_t *dst = malloc(cap), *back = malloc(len);
  lzma_ret rc = lzma_easy_buffer_encode(preset, LZMA_CHECK_CRC64, NULL, src, len, dst, &clen, cap);
  if (rc != LZMA_OK) { fprintf(stderr, "encode: %d\n", rc); return 1; }

  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&s, UINT64_MAX, 0) != LZMA_OK) return 1;
  s.next_in = dst;
  s.avail_in = clen;
  size_t pos = 0;
  do {
    s.next_out = back + pos;
    s.avail_out = len - pos < 65536 ? len - pos : 65536;
    rc = lzma_code(&s, s.avail_in ? LZMA_RUN : LZMA_FINISH);
    pos = (size_t)s.total_out;
    if (rc != LZMA_OK && rc != LZMA_STREAM_END) { fprintf(stderr, "decode: %d\n", rc); return 1; }
  } while (rc != LZMA_STREAM_END);
  lzma_end(&s);
  if (pos != len || memcmp(src, back, len)) { fprintf(stderr, "roundtrip failed\n"); return 1; }

  uint32_t sum = lzma_crc32(dst, clen, 0);
  uint64_t in64 = lzma_crc64(src, len, 0);
  printf("xz %s preset %u: %zu -> %zu bytes, crc32 %08x, input crc64 %016llx\n",
         lzma_version_string(), preset, len, clen, sum, (unsigned long long)in64);
  return 0;
}
