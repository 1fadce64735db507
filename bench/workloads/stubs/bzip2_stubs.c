/* bzip2's CLI copies permissions and ownership to its output file; WASI has neither. */
#include <sys/types.h>
int fchmod(int fd, mode_t mode) { (void)fd; (void)mode; return 0; }
int fchown(int fd, uid_t owner, gid_t group) { (void)fd; (void)owner; (void)group; return 0; }
int chmod(const char *path, mode_t mode) { (void)path; (void)mode; return 0; }
int chown(const char *path, uid_t owner, gid_t group) { (void)path; (void)owner; (void)group; return 0; }
