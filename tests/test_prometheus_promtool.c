/*
 * The formatter's output passes the real `promtool check metrics` (Debian
 * package `prometheus`): every state, several breakers in one exposition,
 * names that need escaping, extreme values, and the unlabelled single
 * breaker. promtool must exit 0 and print nothing (a lint warning is a
 * failure too).
 *
 * First a self-check: promtool must REJECT three known-bad texts (a counter
 * without _total, a repeated TYPE line, a raw invalid byte in a label), so
 * that this test cannot pass by running something that accepts anything.
 *
 * Then a large exposition written by the stream form
 * (circuit_stats_write_prometheus_many) into a file, CIRCUIT_PROMTOOL_BREAKERS
 * breakers (default 10000; 100000 makes the 110 MB text of the header's
 * example): promtool reads it from the file.
 *
 * A plain program (not Criterion): it also runs in the TSan build.
 * Exit 0: pass; 1: fail (also when promtool is missing under CI=true, which
 * .ci/run sets); 77: skipped (promtool is not installed, outside CI). `PROMTOOL` in the environment overrides the program.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "circuit.h"
#include "circuit_prometheus.h"

/* CI (CI=true, as .ci/run sets it) must run the check: a missing promtool
 * fails there instead of skipping. */
static bool in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "false") != 0 && strcmp(ci, "0") != 0;
}

static const char *promtool(void)
{
    const char *p = getenv("PROMTOOL");
    return p && *p ? p : "promtool";
}

/* Runs `promtool check metrics` with `text` on stdin. Returns its exit
 * status (or -1 when it could not run; 127 when the program is missing) and
 * puts what it printed (stdout and stderr) in out. */
static int run_promtool(const char *text, char *out, size_t out_len)
{
    int in[2], res[2];
    if (pipe(in) != 0 || pipe(res) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(res[1], STDOUT_FILENO);
        dup2(res[1], STDERR_FILENO);
        close(in[0]);
        close(in[1]);
        close(res[0]);
        close(res[1]);
        execlp(promtool(), promtool(), "check", "metrics", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(res[1]);
    /* The texts are a few KiB, below the pipe's capacity: write all, then read. */
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t k = write(in[1], text + off, len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    close(in[1]);
    size_t used = 0;
    for (;;) {
        ssize_t k = read(res[0], out + used, out_len - 1 - used);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        used += (size_t)k;
        if (used == out_len - 1)
            break;
    }
    out[used] = '\0';
    close(res[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `promtool check metrics < path`: its exit status (127: missing, -1:
 * could not run), its output in out. */
static int run_promtool_file(const char *path, char *out, size_t out_len)
{
    int res[2];
    if (pipe(res) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            _exit(126);
        dup2(fd, STDIN_FILENO);
        dup2(res[1], STDOUT_FILENO);
        dup2(res[1], STDERR_FILENO);
        close(fd);
        close(res[0]);
        close(res[1]);
        execlp(promtool(), promtool(), "check", "metrics", (char *)NULL);
        _exit(127);
    }
    close(res[1]);
    size_t used = 0;
    for (;;) {
        ssize_t k = read(res[0], out + used, out_len - 1 - used);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        used += (size_t)k;
        if (used == out_len - 1)
            break;
    }
    out[used] = '\0';
    close(res[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int to_file(void *arg, const char *data, size_t len)
{
    return fwrite(data, 1, len, (FILE *)arg) == len ? 0 : EIO;
}

static int failures;

/* n breakers of every state, streamed to a file, checked by promtool. */
static void expect_clean_streamed(size_t n)
{
    circuit_stats *st = calloc(n, sizeof *st);
    char **names = calloc(n, sizeof *names);
    char path[] = "/tmp/circuit-promtool-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!st || !names || !f) {
        printf("FAIL streamed: could not set up (%s)\n", strerror(errno));
        failures++;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        st[i] = (circuit_stats){.state = (circuit_state)(1 + i % 4), .generation = i % 9,
                                .retry_after_ns = (int64_t)i * 7, .admitted = i * 1000,
                                .successes = i * 990, .failures = i * 10, .transitions = i % 9};
        names[i] = malloc(64);
        snprintf(names[i], 64, "upstream-%zu.pool-%zu.example:8080", i, i % 97);
    }
    int rc = circuit_stats_write_prometheus_many(st, (const char *const *)names, n, to_file, f);
    long size = ftell(f);
    if (fclose(f) != 0 && rc == 0)
        rc = EIO;
    if (rc != 0) {
        printf("FAIL streamed %zu breakers: %s\n", n, strerror(rc));
        failures++;
    } else {
        char out[4096];
        int prc = run_promtool_file(path, out, sizeof out);
        if (prc != 0 || out[0] != '\0') {
            printf("FAIL streamed %zu breakers (%ld bytes): promtool exit %d, said:\n%s\n", n,
                   size, prc, out);
            failures++;
        } else {
            printf("ok   %zu breakers streamed to a file (%ld bytes): promtool check metrics "
                   "passes\n",
                   n, size);
        }
    }
    unlink(path);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(st);
}

static void expect_rejected(const char *what, const char *text)
{
    char out[4096];
    int rc = run_promtool(text, out, sizeof out);
    if (rc == 0) {
        printf("FAIL self-check: promtool accepted %s\n", what);
        failures++;
    } else {
        printf("ok   self-check: promtool rejects %s (exit %d): %s", what, rc, out);
    }
}

static void expect_clean(const char *what, const char *text)
{
    char out[4096];
    int rc = run_promtool(text, out, sizeof out);
    if (rc != 0 || out[0] != '\0') {
        printf("FAIL %s: promtool exit %d, said:\n%s\n--- the text:\n%s---\n", what, rc, out,
               text);
        failures++;
    } else {
        printf("ok   %s: promtool check metrics passes (%zu bytes)\n", what, strlen(text));
    }
}

static char *format_many(const circuit_stats *st, const char *const *names, size_t n)
{
    int len = circuit_stats_format_prometheus_many(st, names, n, NULL, 0);
    if (len < 0) {
        printf("FAIL format: -1, errno %d\n", errno);
        exit(1);
    }
    char *buf = malloc((size_t)len + 1);
    if (!buf || circuit_stats_format_prometheus_many(st, names, n, buf, (size_t)len + 1) != len)
        exit(1);
    return buf;
}

int main(void)
{
    char probe_out[256];
    int rc = run_promtool("", probe_out, sizeof probe_out);
    if (rc == 127 || rc == -1) {
        if (in_ci()) {
            printf("FAIL: `%s` could not run, and CI=%s: CI must run this check (install "
                   "Debian's `prometheus` package)\n",
                   promtool(), getenv("CI"));
            return 1;
        }
        printf("SKIP: `%s` could not run (install Debian's `prometheus` package; under "
               "CI=true this is a failure)\n",
               promtool());
        return 77;
    }

    expect_rejected("a counter without _total",
                    "# HELP foo x\n# TYPE foo counter\nfoo 1\n");
    expect_rejected("a repeated TYPE line",
                    "# HELP foo x\n# TYPE foo gauge\nfoo 1\n# HELP foo x\n# TYPE foo gauge\n"
                    "foo{a=\"b\"} 1\n");
    expect_rejected("an invalid byte in a label value", "foo{a=\"\xff\"} 1\n");

    circuit_stats st[4] = {
        {.state = CIRCUIT_CLOSED, .counts = {90, 3, 0, 2, 0}, .admitted = 1000000,
         .successes = 999000, .failures = 900, .ignored = 50, .late = 3, .released = 47},
        {.state = CIRCUIT_OPEN, .generation = 7, .retry_after_ns = 29999999999,
         .admitted = 12, .rejected = 400, .failures = 12, .transitions = 7},
        {.state = CIRCUIT_HALF_OPEN, .generation = 8, .counts = {1, 0, 1, 0, 2},
         .probes_in_flight = 3, .admitted = UINT64_MAX, .rejected = UINT64_MAX,
         .successes = UINT64_MAX, .failures = UINT64_MAX, .ignored = UINT64_MAX,
         .late = UINT64_MAX, .released = UINT64_MAX, .timed_out = UINT64_MAX,
         .transitions = UINT64_MAX},
        {.state = CIRCUIT_ISOLATED, .generation = 9, .rejected = 5, .transitions = 9},
    };
    const char *names[4] = {"10.0.0.1:8080", "api \"v2\" \\ east\nline two", "caf\xc3\xa9 \xf0\x9f\x98\x80",
                            ""};

    char *text = format_many(st, names, 4);
    expect_clean("four breakers, every state, escaped and UTF-8 names", text);
    free(text);

    for (size_t i = 0; i < 4; i++) {
        text = format_many(&st[i], NULL, 1);
        char what[64];
        snprintf(what, sizeof what, "one unlabelled breaker, %s", circuit_state_name(st[i].state));
        expect_clean(what, text);
        free(text);
    }

    /* Concatenating two single-breaker texts is what the header warns
     * against; promtool agrees. */
    char one[8192], two[8192], both[16384];
    circuit_stats_format_prometheus(&st[0], "a", one, sizeof one);
    circuit_stats_format_prometheus(&st[1], "b", two, sizeof two);
    snprintf(both, sizeof both, "%s%s", one, two);
    expect_rejected("two single-breaker texts concatenated", both);

    const char *many = getenv("CIRCUIT_PROMTOOL_BREAKERS");
    expect_clean_streamed(many && *many ? (size_t)strtoul(many, NULL, 10) : 10000);

    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
