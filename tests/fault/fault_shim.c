// LD_PRELOAD shim for the fault-injection test (built only with the tests).
//
// Counts the operations that put output on disk -- write/pwrite/writev and
// copy_file_range into files the process created (opened with O_CREAT),
// fsync/fdatasync/ftruncate of them, rename/renameat/renameat2, mkdir -- and
// makes the one numbered PTEPACK_FAULT_AT fail:
//   PTEPACK_FAULT_MODE unset/"fail": the call fails (ENOSPC for writes, EIO
//     for syncs, EIO for renames and mkdir) without doing anything;
//   "signal": the process sends itself SIGTERM just before the call, which
//     then goes ahead (the signal must be honoured, not the call failed).
// PTEPACK_FAULT_LOG names a file that receives the number of operations
// counted when the process exits normally.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static long g_at = -1;
static long g_count = 0;
static int g_signal_mode = 0;
static unsigned char g_tracked[65536];

static void Init(void) __attribute__((constructor));
static void Init(void) {
  const char* at = getenv("PTEPACK_FAULT_AT");
  if (at) g_at = atol(at);
  const char* mode = getenv("PTEPACK_FAULT_MODE");
  g_signal_mode = mode && strcmp(mode, "signal") == 0;
}

static void Fini(void) __attribute__((destructor));
static void Fini(void) {
  const char* log = getenv("PTEPACK_FAULT_LOG");
  if (!log) return;
  int fd = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%ld\n", g_count);
  if (n > 0) (void)!syscall(SYS_write, fd, buf, (size_t)n);
  syscall(SYS_close, fd);
}

// 1 if this operation must fail.
static int Hit(void) {
  long n = ++g_count;
  if (g_at <= 0 || n != g_at) return 0;
  if (g_signal_mode) {
    kill(getpid(), SIGTERM);
    return 0;
  }
  return 1;
}

static int Tracked(int fd) { return fd >= 0 && fd < (int)sizeof g_tracked && g_tracked[fd]; }
static void Track(int fd, int flags) {
  if (fd >= 0 && fd < (int)sizeof g_tracked) g_tracked[fd] = (flags & O_CREAT) != 0;
}

#define REAL(name)                      \
  static __typeof__(&name) real_##name; \
  if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int open(const char* path, int flags, ...) {
  REAL(open);
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  int fd = real_open(path, flags, mode);
  Track(fd, flags);
  return fd;
}
int open64(const char* path, int flags, ...) {
  REAL(open64);
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  int fd = real_open64(path, flags, mode);
  Track(fd, flags);
  return fd;
}
int openat(int dirfd, const char* path, int flags, ...) {
  REAL(openat);
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  int fd = real_openat(dirfd, path, flags, mode);
  Track(fd, flags);
  return fd;
}
int close(int fd) {
  REAL(close);
  if (fd >= 0 && fd < (int)sizeof g_tracked) g_tracked[fd] = 0;
  return real_close(fd);
}
ssize_t write(int fd, const void* p, size_t n) {
  REAL(write);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_write(fd, p, n);
}
ssize_t pwrite(int fd, const void* p, size_t n, off_t off) {
  REAL(pwrite);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_pwrite(fd, p, n, off);
}
ssize_t pwrite64(int fd, const void* p, size_t n, off_t off) {
  REAL(pwrite64);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_pwrite64(fd, p, n, off);
}
ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  REAL(writev);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_writev(fd, iov, cnt);
}
ssize_t copy_file_range(int in, off_t* in_off, int out, off_t* out_off, size_t n, unsigned flags) {
  REAL(copy_file_range);
  if (Tracked(out) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_copy_file_range(in, in_off, out, out_off, n, flags);
}
int fsync(int fd) {
  REAL(fsync);
  if (Tracked(fd) && Hit()) {
    errno = EIO;
    return -1;
  }
  return real_fsync(fd);
}
int fdatasync(int fd) {
  REAL(fdatasync);
  if (Tracked(fd) && Hit()) {
    errno = EIO;
    return -1;
  }
  return real_fdatasync(fd);
}
int ftruncate(int fd, off_t len) {
  REAL(ftruncate);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_ftruncate(fd, len);
}
int ftruncate64(int fd, off_t len) {
  REAL(ftruncate64);
  if (Tracked(fd) && Hit()) {
    errno = ENOSPC;
    return -1;
  }
  return real_ftruncate64(fd, len);
}
int rename(const char* a, const char* b) {
  REAL(rename);
  if (Hit()) {
    errno = EIO;
    return -1;
  }
  return real_rename(a, b);
}
int renameat(int da, const char* a, int db, const char* b) {
  REAL(renameat);
  if (Hit()) {
    errno = EIO;
    return -1;
  }
  return real_renameat(da, a, db, b);
}
int renameat2(int da, const char* a, int db, const char* b, unsigned flags) {
  REAL(renameat2);
  if (Hit()) {
    errno = EIO;
    return -1;
  }
  return real_renameat2(da, a, db, b, flags);
}
int mkdir(const char* p, mode_t m) {
  REAL(mkdir);
  if (Hit()) {
    errno = EIO;
    return -1;
  }
  return real_mkdir(p, m);
}
