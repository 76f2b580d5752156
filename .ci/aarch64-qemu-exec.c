/*
 * LD_PRELOAD helper for running aarch64 programs under qemu-user on a host
 * without a binfmt_misc handler for aarch64 (containers, CI machines).
 *
 * Criterion runs every test in a child process: it forks, then the child
 * exec()s the test program again (BoxFort's "boxfort-worker"). Under
 * qemu-user that execve() reaches the host kernel, which cannot run an
 * aarch64 ELF by itself (ENOEXEC, "Could not spawn test instance"). This
 * library, preloaded into the guest, turns an execve() of an aarch64 ELF
 * into an execve() of the host's qemu-aarch64 with that program as its
 * argument; the pid, the open descriptors and the signal dance Criterion
 * relies on are those of a plain exec, since qemu-user's execve is the host's.
 *
 * Environment (read in the guest, i.e. passed through by qemu):
 *   CIRCUIT_QEMU_AARCH64  the host's qemu-aarch64 (default /usr/bin/qemu-aarch64)
 *   QEMU_LD_PREFIX        the sysroot; qemu reads it itself (same as -L)
 *   QEMU_SET_ENV          LD_PRELOAD=<dir>/$LIB/<this library>: qemu sets it
 *                         for the guest only. A host program that a guest
 *                         starts (a shell through system(), promtool) inherits
 *                         it too: $LIB makes its ld.so look in
 *                         <dir>/lib/x86_64-linux-gnu, where a host library
 *                         that does nothing sits, instead of complaining
 *                         about an aarch64 one.
 *
 * Built and used by .ci/aarch64-test.sh; not part of the library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int execve(const char *path, char *const argv[], char *const envp[]);
int execv(const char *path, char *const argv[]);
int execl(const char *path, const char *arg, ...);

typedef int execve_fn(const char *, char *const[], char *const[]);

static int is_aarch64_elf(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    Elf64_Ehdr h;
    ssize_t n = read(fd, &h, sizeof h);
    close(fd);
    return n == (ssize_t)sizeof h && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0 &&
           h.e_ident[EI_CLASS] == ELFCLASS64 && h.e_machine == EM_AARCH64;
}

/* No allocation: this runs in the child of a fork() of a threaded process. */
int execve(const char *path, char *const argv[], char *const envp[])
{
    execve_fn *real;
    void *sym = dlsym(RTLD_NEXT, "execve");
    memcpy(&real, &sym, sizeof real); /* ISO C has no object -> function pointer cast */
    if (real == NULL || !is_aarch64_elf(path))
        return real != NULL ? real(path, argv, envp) : -1;

    const char *qemu = NULL;
    size_t envc = 0, argc = 0;
    for (; envp[envc] != NULL; envc++)
        if (strncmp(envp[envc], "CIRCUIT_QEMU_AARCH64=", 21) == 0)
            qemu = envp[envc] + 21;
    if (qemu == NULL || qemu[0] == '\0')
        qemu = "/usr/bin/qemu-aarch64";
    while (argv[argc] != NULL)
        argc++;

    /* qemu-aarch64 -0 <argv[0]> <path> <argv[1]> ... */
    char *nargv[argc + 4];
    size_t k = 0;
    nargv[k++] = (char *)qemu;
    nargv[k++] = (char *)"-0";
    nargv[k++] = argc > 0 ? argv[0] : (char *)path;
    nargv[k++] = (char *)path;
    for (size_t i = 1; i < argc; i++)
        nargv[k++] = argv[i];
    nargv[k] = NULL;

    /* The host's qemu must not preload this aarch64 library itself. */
    char *nenvp[envc + 1];
    k = 0;
    for (size_t i = 0; i < envc; i++)
        if (strncmp(envp[i], "LD_PRELOAD=", 11) != 0)
            nenvp[k++] = envp[i];
    nenvp[k] = NULL;
    return real(qemu, nargv, nenvp);
}

int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

int execl(const char *path, const char *arg, ...)
{
    size_t n = 1; /* arguments before the terminating NULL (glibc: arg is nonnull) */
    va_list ap;
    va_start(ap, arg);
    while (va_arg(ap, const char *) != NULL)
        n++;
    va_end(ap);

    char *args[n + 1];
    args[0] = (char *)arg;
    va_start(ap, arg);
    for (size_t i = 1; i <= n; i++)
        args[i] = va_arg(ap, char *);
    va_end(ap);
    return execve(path, args, environ);
}
