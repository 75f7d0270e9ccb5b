/* A crash injector, preloaded (LD_PRELOAD) into a tick and, through the environment,
 * into every git process it starts.
 *
 * It counts the calls of six kinds across all processes and threads that load it, in
 * one counter per kind kept in a shared file (CRASH_SHIM_COUNTERS, six 64-bit counters,
 * incremented atomically), so "the n-th write" means the n-th write of the whole tick,
 * whichever thread or git child makes it:
 *
 *   rename  rename, renameat, renameat2, link, linkat (git moves objects in with link)
 *   write   write, pwrite, pwrite64, writev, pwritev to a regular file (not pipes)
 *   fsync   fsync, fdatasync
 *   unlink  unlink, unlinkat (also with AT_REMOVEDIR, as the system call is the same)
 *   create  open, open64, openat, openat64 with O_CREAT; creat; fopen with "w" or "a"
 *   mkdir   mkdir, mkdirat
 *
 * When CRASH_SHIM_KIND names a kind and CRASH_SHIM_AT a number n, the n-th call of that
 * kind sends SIGKILL to its whole process group (kill(0, SIGKILL)) before the call is
 * made: the call never takes effect; calls that other threads or processes have in
 * flight at that moment finish, as with any SIGKILL. With CRASH_SHIM_ERRNO set as well
 * (a number, or ENOSPC, EIO, EDQUOT, EROFS, EACCES), the n-th call is not made and fails
 * with that errno instead (-1, or NULL for fopen): a full or failing disk, not a crash;
 * with CRASH_SHIM_STICKY=1 every call of the kind from the n-th on fails so (the disk
 * stays full for the rest of the tick). Without CRASH_SHIM_KIND every call is counted
 * and logged. Each logged call (every call, or only those that crashed or failed) is
 * one line appended to CRASH_SHIM_LOG:
 *
 *   <kind> <n> <pid> <tid> <process name> <call>(<path or fd's path>[, ...])
 *
 * Calls that the C library makes internally (stdio buffers flushed to a file) do not
 * pass through these symbols and are not seen. Without CRASH_SHIM_COUNTERS the shim
 * only passes calls through. A process forked from one that loaded the shim so (the
 * tests' fork server) calls crash_shim_configure() once its environment is set, and
 * counts from there as a process that started with the settings does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { K_RENAME, K_WRITE, K_FSYNC, K_UNLINK, K_CREATE, K_MKDIR, N_KINDS };
static const char *const kind_names[N_KINDS] = {"rename", "write",  "fsync",
                                                "unlink", "create", "mkdir"};

static volatile int64_t *counters;
static int target_kind = -1;
static int64_t target_n;
static int fail_errno; /* 0: crash at the target; else fail it with this errno */
static int sticky;     /* fail every call of the kind from the target on */
static int log_fd = -1;
static char comm[32] = "?";

static int raw_open(const char *path, int flags, int mode) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
}

static int errno_named(const char *name) {
    static const struct {
        const char *name;
        int value;
    } known[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO}, {"EDQUOT", EDQUOT},
                 {"EROFS", EROFS},   {"EACCES", EACCES}};
    if (name == NULL || *name == '\0')
        return 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0)
            return known[i].value;
    return (int)strtol(name, NULL, 10);
}

/* Read the settings from the environment: at load, and again in a process forked from
 * one that loaded the injector without settings, once its environment is set (the
 * tests' fork server calls it so). */
__attribute__((visibility("default"))) void crash_shim_configure(void) {
    const char *path = getenv("CRASH_SHIM_COUNTERS");
    if (path == NULL || *path == '\0')
        return;
    int fd = raw_open(path, O_RDWR, 0);
    if (fd < 0)
        return;
    void *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    syscall(SYS_close, fd);
    if (map == MAP_FAILED)
        return;
    const char *kind = getenv("CRASH_SHIM_KIND");
    const char *at = getenv("CRASH_SHIM_AT");
    if (kind != NULL && at != NULL) {
        for (int k = 0; k < N_KINDS; k++)
            if (strcmp(kind, kind_names[k]) == 0)
                target_kind = k;
        target_n = strtoll(at, NULL, 10);
        fail_errno = errno_named(getenv("CRASH_SHIM_ERRNO"));
        const char *st = getenv("CRASH_SHIM_STICKY");
        sticky = fail_errno != 0 && st != NULL && strcmp(st, "1") == 0;
    }
    const char *log = getenv("CRASH_SHIM_LOG");
    if (log != NULL && *log != '\0')
        log_fd = raw_open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    int cfd = raw_open("/proc/self/comm", O_RDONLY, 0);
    if (cfd >= 0) {
        ssize_t n = syscall(SYS_read, cfd, comm, sizeof comm - 1);
        syscall(SYS_close, cfd);
        comm[n > 0 ? n : 0] = '\0';
        char *nl = strchr(comm, '\n');
        if (nl != NULL)
            *nl = '\0';
        for (char *c = comm; *c; c++)
            if (*c == ' ' || *c == '\t')
                *c = '_';
    }
    counters = map;
}

__attribute__((constructor)) static void crash_shim_init(void) { crash_shim_configure(); }

static void fd_path(int fd, char *out, size_t size) {
    char link[64];
    if (fd == AT_FDCWD) {
        snprintf(out, size, ".");
        return;
    }
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    if (n < 0)
        snprintf(out, size, "fd %d", fd);
    else
        out[n] = '\0';
}

/* A path as called, made absolute with the directory fd when it is relative. */
static void at_path(int dirfd, const char *path, char *out, size_t size) {
    if (path == NULL) {
        snprintf(out, size, "(null)");
    } else if (path[0] == '/' || dirfd == AT_FDCWD) {
        snprintf(out, size, "%s", path);
    } else {
        char dir[1024];
        fd_path(dirfd, dir, sizeof dir);
        snprintf(out, size, "%s/%s", dir, path);
    }
}

static void emit(int kind, int64_t n, const char *call, const char *detail) {
    char line[2600];
    int len = snprintf(line, sizeof line, "%s %lld %ld %ld %s %s(%s)\n", kind_names[kind],
                       (long long)n, (long)getpid(), (long)syscall(SYS_gettid), comm, call,
                       detail);
    if (len > (int)sizeof line - 1)
        len = (int)sizeof line - 1, line[len - 1] = '\n';
    if (log_fd >= 0)
        syscall(SYS_write, log_fd, line, (size_t)len);
}

/* Count one call; log it; crash when it is the chosen one, or (CRASH_SHIM_ERRNO) return
 * ``failed`` from the calling function with that errno, the real call never made. The
 * detail is formatted only when it is logged. */
#define EVENT_OR(failed, kind, call, ...)                                                \
    do {                                                                                 \
        if (counters != NULL) {                                                          \
            int64_t n_ = __atomic_add_fetch(&counters[kind], 1, __ATOMIC_SEQ_CST);       \
            int hit_ = (kind) == target_kind && (sticky ? n_ >= target_n : n_ == target_n); \
            if (hit_ || (target_kind < 0 && log_fd >= 0)) {                              \
                char detail_[2048];                                                      \
                snprintf(detail_, sizeof detail_, __VA_ARGS__);                          \
                emit(kind, n_, call, detail_);                                           \
            }                                                                            \
            if (hit_ && fail_errno != 0) {                                               \
                errno = fail_errno;                                                      \
                return failed;                                                           \
            }                                                                            \
            if (hit_)                                                                    \
                crash();                                                                 \
        }                                                                                \
    } while (0)
#define EVENT(kind, call, ...) EVENT_OR(-1, kind, call, __VA_ARGS__)

static void crash(void) {
    syscall(SYS_kill, 0, SIGKILL);
    syscall(SYS_kill, (pid_t)syscall(SYS_getpid), SIGKILL);
    for (;;)
        pause();
}

#define REAL(name)                                          \
    ({                                                      \
        static __typeof__(&name) real_;                     \
        if (real_ == NULL)                                  \
            real_ = (__typeof__(&name))real_symbol(#name); \
        real_;                                              \
    })

static void *real_symbol(const char *name) {
    void *sym = dlsym(RTLD_NEXT, name);
    if (sym == NULL)
        abort();
    return sym;
}

static int regular(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

#define PATH2(dirfd, p) \
    char p##_[1024];    \
    at_path(dirfd, p, p##_, sizeof p##_)
#define FDPATH(fd) \
    char fd##_[1024]; \
    fd_path(fd, fd##_, sizeof fd##_)

/* --- rename ---------------------------------------------------------------------- */

int rename(const char *from, const char *to) {
    EVENT(K_RENAME, "rename", "%s, %s", from, to);
    return REAL(rename)(from, to);
}

int renameat(int fromfd, const char *from, int tofd, const char *to) {
    if (counters != NULL) {
        PATH2(fromfd, from);
        PATH2(tofd, to);
        EVENT(K_RENAME, "renameat", "%s, %s", from_, to_);
    }
    return REAL(renameat)(fromfd, from, tofd, to);
}

int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    if (counters != NULL) {
        PATH2(fromfd, from);
        PATH2(tofd, to);
        EVENT(K_RENAME, "renameat2", "%s, %s, %u", from_, to_, flags);
    }
    return REAL(renameat2)(fromfd, from, tofd, to, flags);
}

int link(const char *from, const char *to) {
    EVENT(K_RENAME, "link", "%s, %s", from, to);
    return REAL(link)(from, to);
}

int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    if (counters != NULL) {
        PATH2(fromfd, from);
        PATH2(tofd, to);
        EVENT(K_RENAME, "linkat", "%s, %s", from_, to_);
    }
    return REAL(linkat)(fromfd, from, tofd, to, flags);
}

/* --- write (regular files only) ---------------------------------------------------- */

ssize_t write(int fd, const void *buf, size_t count) {
    if (counters != NULL && regular(fd)) {
        FDPATH(fd);
        EVENT(K_WRITE, "write", "%s, %zu bytes", fd_, count);
    }
    return REAL(write)(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    if (counters != NULL && regular(fd)) {
        FDPATH(fd);
        EVENT(K_WRITE, "pwrite", "%s, %zu bytes at %lld", fd_, count, (long long)offset);
    }
    return REAL(pwrite)(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
    if (counters != NULL && regular(fd)) {
        FDPATH(fd);
        EVENT(K_WRITE, "pwrite64", "%s, %zu bytes at %lld", fd_, count, (long long)offset);
    }
    return REAL(pwrite64)(fd, buf, count, offset);
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
    if (counters != NULL && regular(fd)) {
        FDPATH(fd);
        EVENT(K_WRITE, "writev", "%s, %d buffers", fd_, iovcnt);
    }
    return REAL(writev)(fd, iov, iovcnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt, off_t offset) {
    if (counters != NULL && regular(fd)) {
        FDPATH(fd);
        EVENT(K_WRITE, "pwritev", "%s, %d buffers at %lld", fd_, iovcnt, (long long)offset);
    }
    return REAL(pwritev)(fd, iov, iovcnt, offset);
}

/* --- fsync --------------------------------------------------------------------------- */

int fsync(int fd) {
    if (counters != NULL) {
        FDPATH(fd);
        EVENT(K_FSYNC, "fsync", "%s", fd_);
    }
    return REAL(fsync)(fd);
}

int fdatasync(int fd) {
    if (counters != NULL) {
        FDPATH(fd);
        EVENT(K_FSYNC, "fdatasync", "%s", fd_);
    }
    return REAL(fdatasync)(fd);
}

/* --- unlink -------------------------------------------------------------------------- */

int unlink(const char *path) {
    EVENT(K_UNLINK, "unlink", "%s", path);
    return REAL(unlink)(path);
}

int unlinkat(int dirfd, const char *path, int flags) {
    if (counters != NULL) {
        PATH2(dirfd, path);
        EVENT(K_UNLINK, "unlinkat", "%s%s", path_, flags & AT_REMOVEDIR ? ", AT_REMOVEDIR" : "");
    }
    return REAL(unlinkat)(dirfd, path, flags);
}

/* --- open with O_CREAT --------------------------------------------------------------- */

#define MODE_ARG(flags)                          \
    mode_t mode = 0;                             \
    if ((flags) & (O_CREAT | __O_TMPFILE)) {     \
        va_list ap;                              \
        va_start(ap, flags);                     \
        mode = (mode_t)va_arg(ap, int);          \
        va_end(ap);                              \
    }

#define OPEN_EVENT(call, dirfd, path, flags)                                      \
    if (counters != NULL && ((flags) & O_CREAT)) {                                \
        PATH2(dirfd, path);                                                       \
        EVENT(K_CREATE, call, "%s, %s%s", path_, (flags) & O_EXCL ? "O_EXCL|" : "", \
              "O_CREAT");                                                         \
    }

int open(const char *path, int flags, ...) {
    MODE_ARG(flags);
    OPEN_EVENT("open", AT_FDCWD, path, flags);
    return REAL(open)(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    MODE_ARG(flags);
    OPEN_EVENT("open64", AT_FDCWD, path, flags);
    return REAL(open64)(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags);
    OPEN_EVENT("openat", dirfd, path, flags);
    return REAL(openat)(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    MODE_ARG(flags);
    OPEN_EVENT("openat64", dirfd, path, flags);
    return REAL(openat64)(dirfd, path, flags, mode);
}

int creat(const char *path, mode_t mode) {
    OPEN_EVENT("creat", AT_FDCWD, path, O_CREAT);
    return REAL(creat)(path, mode);
}

int creat64(const char *path, mode_t mode) {
    OPEN_EVENT("creat64", AT_FDCWD, path, O_CREAT);
    return REAL(creat64)(path, mode);
}

static int creates(const char *mode) {
    return mode != NULL && (strchr(mode, 'w') != NULL || strchr(mode, 'a') != NULL);
}

FILE *fopen(const char *path, const char *mode) {
    if (creates(mode))
        EVENT_OR(NULL, K_CREATE, "fopen", "%s, \"%s\"", path, mode);
    return REAL(fopen)(path, mode);
}

FILE *fopen64(const char *path, const char *mode) {
    if (creates(mode))
        EVENT_OR(NULL, K_CREATE, "fopen64", "%s, \"%s\"", path, mode);
    return REAL(fopen64)(path, mode);
}

/* --- mkdir --------------------------------------------------------------------------- */

int mkdir(const char *path, mode_t mode) {
    EVENT(K_MKDIR, "mkdir", "%s", path);
    return REAL(mkdir)(path, mode);
}

int mkdirat(int dirfd, const char *path, mode_t mode) {
    if (counters != NULL) {
        PATH2(dirfd, path);
        EVENT(K_MKDIR, "mkdirat", "%s", path_);
    }
    return REAL(mkdirat)(dirfd, path, mode);
}
