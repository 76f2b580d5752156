/*
 * racy-canary: a data race on purpose (L3).
 *
 * SPDX-License-Identifier: MIT
 *
 * Two threads increment one plain int with no synchronisation between them.
 * Built with the same flags as the stress programs and run with the same
 * TSAN_OPTIONS (including tests/stress/tsan.supp), it must make
 * ThreadSanitizer print "WARNING: ThreadSanitizer: data race": ctest passes
 * it only when that text appears (PASS_REGULAR_EXPRESSION). So a TSan build
 * that silently checks nothing (flags lost, runtime not linked, reports
 * suppressed) cannot make the TSan suite pass.
 *
 * Both threads are started before either is joined, so no happens-before
 * edge orders their writes, however the scheduler runs them.
 */
#include <pthread.h>
#include <stdio.h>

static int shared; /* plain, on purpose */

static void *bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        shared++;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("racy-canary: shared = %d (a TSan report is expected above)\n", shared);
    return 0;
}
