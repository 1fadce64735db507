/* wasi-libc (Debian's 2022 snapshot) has no setjmp. Lua only longjmps on errors, and the
 * workload scripts raise none, so an error aborts instead of unwinding. */
#ifndef PEPPER_SETJMP_STUB_H
#define PEPPER_SETJMP_STUB_H
#include <stdlib.h>
typedef int jmp_buf[1];
#define setjmp(b) ((void)(b), 0)
#define longjmp(b, v) ((void)(b), (void)(v), abort())
#define _setjmp setjmp
#define _longjmp longjmp
#endif
