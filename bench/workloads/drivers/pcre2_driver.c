/* Runs PCRE2's interpreter (no JIT) with a dozen patterns over a generated server log (argv[2]),
 * argv[1] rounds: dates, addresses, e-mails, back-references, lazy and possessive quantifiers,
 * lookarounds, Unicode properties and one pattern through the DFA matcher. Prints, per pattern,
 * the number of matches and a checksum of their offsets and captured groups. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pcre2.h"

static const struct { const char *re; uint32_t opts; int dfa; } pats[] = {
  {"^(\\d{4})-(\\d\\d)-(\\d\\d) (\\d\\d):(\\d\\d):(\\d\\d)\\.\\d{3} (ERROR|WARN)\\b", PCRE2_MULTILINE, 0},
  {"\\[(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\]", 0, 0},
  {"user=([a-z]+)(\\d*)@((?:[a-z]+\\.)+(?:com|org|net|edu))\\b", 0, 0},
  {"status=(5\\d\\d|40[34]) bytes=(\\d+) took=(\\d{4,})ms", 0, 0},
  {"msg=\"((?:[a-z]+ ){3,}+[a-z]+)\"", 0, 0},
  {"(?i)\\b(PROFILE|memory|Trap)\\b[^\\n]*?\\b(yield|export)\\b", 0, 0},
  {"/(\\w+)/\\1\\b", 0, 0},
  {"\\b\\p{L}*[\\x{e9}\\x{ef}\\x{fc}]\\p{L}*", PCRE2_UTF | PCRE2_UCP, 0},
  {"trace=([0-9a-f]{16})(?=\\s|$)", PCRE2_MULTILINE, 0},
  {"(?<=GET )/(?!stack|trap)([a-z]+)(?:/[a-z]+)*/(\\d+)\\s", 0, 0},
  {"^.*\\b(?:DELETE|PATCH)\\b.*status=2\\d\\d.*$", PCRE2_MULTILINE, 0},
  {"(?:header|branch|counter)[^ ]* (?:bytes|status)=\\d+", 0, 1},
};
#define NPATS (sizeof pats / sizeof pats[0])

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: pcre2 ROUNDS FILE\n"); return 2; }
  int rounds = atoi(argv[1]);
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 1; }
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *text = malloc(len);
  if (fread(text, 1, len, f) != len) { perror(argv[2]); return 1; }
  fclose(f);

  pcre2_code *code[NPATS];
  for (size_t p = 0; p < NPATS; p++) {
    int err;
    PCRE2_SIZE off;
    code[p] = pcre2_compile((PCRE2_SPTR)pats[p].re, PCRE2_ZERO_TERMINATED, pats[p].opts, &err, &off, NULL);
    if (!code[p]) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fprintf(stderr, "pattern %zu at %zu: %s\n", p, (size_t)off, msg);
      return 1;
    }
  }
  pcre2_match_data *md = pcre2_match_data_create(32, NULL);
  int ws[1000];
  unsigned long counts[NPATS], sums[NPATS];
  for (int r = 0; r < rounds; r++) {
    for (size_t p = 0; p < NPATS; p++) {
      unsigned long count = 0, sum = 0;
      PCRE2_SIZE start = 0;
      while (start <= len) {
        /* The subject is valid UTF-8: check it once, not again at every later start. */
        uint32_t mopts = start > 0 && (pats[p].opts & PCRE2_UTF) ? PCRE2_NO_UTF_CHECK : 0;
        int rc = pats[p].dfa
            ? pcre2_dfa_match(code[p], text, len, start, mopts, md, NULL, ws, 1000)
            : pcre2_match(code[p], text, len, start, mopts, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) { fprintf(stderr, "pattern %zu: match error %d\n", p, rc); return 1; }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        count++;
        sum = sum * 31 + ov[0];
        int groups = pats[p].dfa ? 1 : rc;
        for (int g = 1; g < groups; g++)
          if (ov[2 * g] != PCRE2_UNSET)
            for (PCRE2_SIZE i = ov[2 * g]; i < ov[2 * g + 1]; i++) sum = sum * 131 + text[i];
        start = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
      }
      counts[p] = count;
      sums[p] = sum;
    }
  }
  for (size_t p = 0; p < NPATS; p++)
    printf("pattern %2zu: %6lu matches, checksum %08lx\n", p, counts[p], sums[p] & 0xffffffffUL);
  pcre2_match_data_free(md);
  for (size_t p = 0; p < NPATS; p++) pcre2_code_free(code[p]);
  return 0;
}
