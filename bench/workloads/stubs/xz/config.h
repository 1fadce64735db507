/* liblzma's config.h for wasm32-wasi: lzma-sys's own config.h without threads (wasi-libc has
 * no pthreads here, so the multi-threaded encoder is left out of the build). */
#define HAVE_STDINT_H 1
#define HAVE_STDBOOL_H 1
#define HAVE_STRING_H 1
#define HAVE_INTTYPES_H 1

#define HAVE_DECODER_LZMA1 1
#define HAVE_DECODER_LZMA2 1
#define HAVE_ENCODER_LZMA1 1
#define HAVE_ENCODER_LZMA2 1
#define HAVE_DECODER_LZ 1
#define HAVE_ENCODER_LZ 1
#define HAVE_DECODER_DELTA 1
#define HAVE_ENCODER_DELTA 1
#define HAVE_DECODER_SPARC 1
#define HAVE_ENCODER_SPARC 1
#define HAVE_DECODER_X86 1
#define HAVE_ENCODER_X86 1

#define HAVE_CHECK_SHA256 1
#define HAVE_CHECK_CRC64 1
#define HAVE_CHECK_CRC32 1

#define HAVE_MF_BT2 1
#define HAVE_MF_BT3 1
#define HAVE_MF_BT4 1
#define HAVE_MF_HC3 1
#define HAVE_MF_HC4 1

#define SIZEOF_SIZE_T 4
