/* Parses a generated XML catalogue (argv[2]) with Expat argv[1] times, in 64 KB pieces, with
 * namespace processing, an internal DTD and handlers for elements, attributes, text, comments,
 * CDATA and processing instructions. Prints the counts and a checksum of names and text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "expat.h"

struct stats {
  unsigned long elements, attrs, text_bytes, comments, cdata, pis, max_depth, depth;
  unsigned long sum;
  double prices;
};

static unsigned long hash(unsigned long h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = h * 33 + (unsigned char)s[i];
  return h;
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **atts) {
  struct stats *st = ud;
  st->elements++;
  if (++st->depth > st->max_depth) st->max_depth = st->depth;
  st->sum = hash(st->sum, name, strlen(name));
  for (int i = 0; atts[i]; i += 2) {
    st->attrs++;
    st->sum = hash(hash(st->sum, atts[i], strlen(atts[i])), atts[i + 1], strlen(atts[i + 1]));
    if (strcmp(atts[i], "price") == 0) st->prices += strtod(atts[i + 1], NULL);
  }
}

static void XMLCALL on_end(void *ud, const XML_Char *name) {
  struct stats *st = ud;
  st->depth--;
  st->sum = hash(st->sum, name, 1);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len) {
  struct stats *st = ud;
  st->text_bytes += (unsigned long)len;
  st->sum = hash(st->sum, s, (size_t)len);
}

static void XMLCALL on_comment(void *ud, const XML_Char *s) {
  struct stats *st = ud;
  st->comments++;
  st->sum = hash(st->sum, s, strlen(s));
}

static void XMLCALL on_cdata(void *ud) { ((struct stats *)ud)->cdata++; }

static void XMLCALL on_pi(void *ud, const XML_Char *target, const XML_Char *data) {
  struct stats *st = ud;
  st->pis++;
  st->sum = hash(hash(st->sum, target, strlen(target)), data, strlen(data));
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: expat ROUNDS FILE\n"); return 2; }
  int rounds = atoi(argv[1]);
  FILE *f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 1; }
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *doc = malloc(len);
  if (fread(doc, 1, len, f) != len) { perror(argv[2]); return 1; }
  fclose(f);

  struct stats st;
  for (int r = 0; r < rounds; r++) {
    memset(&st, 0, sizeof st);
    XML_Parser p = XML_ParserCreateNS(NULL, '|');
    XML_SetHashSalt(p, 0x5eed); /* otherwise drawn from the clock and pid */
    XML_SetUserData(p, &st);
    XML_SetElementHandler(p, on_start, on_end);
    XML_SetCharacterDataHandler(p, on_text);
    XML_SetCommentHandler(p, on_comment);
    XML_SetStartCdataSectionHandler(p, on_cdata);
    XML_SetProcessingInstructionHandler(p, on_pi);
    for (size_t pos = 0; pos < len;) {
      size_t piece = len - pos < 65536 ? len - pos : 65536;
      if (XML_Parse(p, doc + pos, (int)piece, pos + piece == len) == XML_STATUS_ERROR) {
        fprintf(stderr, "line %lu: %s\n", (unsigned long)XML_GetCurrentLineNumber(p),
                XML_ErrorString(XML_GetErrorCode(p)));
        return 1;
      }
      pos += piece;
    }
    XML_ParserFree(p);
  }
  printf("%s: %lu elements, %lu attributes, %lu text bytes, %lu comments, %lu cdata, %lu PIs, "
         "depth %lu, prices %.2f, checksum %08lx\n", XML_ExpatVersion(), st.elements, st.attrs,
         st.text_bytes, st.comments, st.cdata, st.pis, st.max_depth, st.prices, st.sum & 0xffffffffUL);
  return 0;
}
