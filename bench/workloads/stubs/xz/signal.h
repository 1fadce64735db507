/* liblzma's mythread.h declares a helper over sigprocmask() that the library never calls;
 * wasi-libc has no signal masks, so this header gives it just the type and a no-op. */
#ifndef PEPPER_XZ_SIGNAL_H
#define PEPPER_XZ_SIGNAL_H
typedef unsigned long sigset_t;
static inline int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  (void)how; (void)set; (void)old;
  return 0;
}
#endif
