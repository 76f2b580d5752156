/*
 * fence-canary: the TSan build's full fence hides no missing edge (docs/CONTRACT.md
 * L7, L3).
 *
 * SPDX-License-Identifier: MIT
 *
 * Usage: fence_canary missing-edge|dekker
 *
 * circuit__fence_sc (src/atomics.h) is the same __atomic_thread_fence in the
 * TSan build as in the release build. TSan draws no happens-before edge
 * through a fence, so what the core's Dekker pairs need must come from their
 * own release stores and acquire loads, which TSan sees. This program uses
 * the core's fence itself (src/atomics.h), in two ways:
 *
 *   missing-edge  a planted bug: the writer fills `data`, then sets the flag
 *                 with a RELAXED store placed BEFORE its fence; the reader
 *                 waits for the flag, lets the writer's fence run (a sleep:
 *                 it orders nothing), runs its own fence and reads `data`.
 *                 In C11 nothing orders the write before the read (a fence
 *                 synchronises only through a store that comes after it), so
 *                 TSan must report a data race on `data` (ctest:
 *                 PASS_REGULAR_EXPRESSION). The fence that the TSan build used
 *                 before (a seq_cst add on one process-wide word) made every
 *                 pair of fences a release/acquire pair and hid this race.
 *   dekker        the pattern the core uses (src/delivery.c, src/probes.c):
 *                 each of two threads fills its record, stores its flag with
 *                 RELEASE, runs the fence, loads the other's flag with
 *                 ACQUIRE and, if it is set, reads the other's record. The
 *                 fence makes at least one of them see the other (checked:
 *                 exit 1 otherwise); the edges come from the flags, and TSan
 *                 must stay silent (exit 0), so the real fence costs the TSan
 *                 suite no false report.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "atomics.h"

/* ---- missing-edge ------------------------------------------------------------ */

static long data; /* plain, on purpose */
static uint64_t flag;

static void *writer(void *arg)
{
    (void)arg;
    data = 42;
    circuit__st_rlx(&flag, 1); /* the planted bug: relaxed, and before the fence */
    circuit__fence_sc();
    return NULL;
}

static void *reader(void *arg)
{
    long *out = arg;
    while (circuit__ld_rlx(&flag) == 0)
        ;
    /* Let the writer's fence run first: with the old TSan form of the fence,
     * the two fences then formed a release/acquire pair. A sleep orders
     * nothing. */
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    circuit__fence_sc();
    *out = data;
    return NULL;
}

static int missing_edge(void)
{
    pthread_t w, r;
    long seen = 0;
    pthread_create(&r, NULL, reader, &seen);
    pthread_create(&w, NULL, writer, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    printf("fence-canary missing-edge: read %ld (a TSan report is expected above)\n", seen);
    return 0;
}

/* ---- dekker ------------------------------------------------------------------ */

typedef struct side {
    long record[4];   /* plain: written before the flag, read after it */
    uint64_t flag;
    long copied;
    int saw_other;
    struct side *other;
    pthread_barrier_t *start;
} side;

static void *dekker_side(void *arg)
{
    side *me = arg;
    /* After the barrier, so that only the flags order the record (a barrier
     * is an edge TSan sees). */
    pthread_barrier_wait(me->start);
    for (int i = 0; i < 4; i++)
        me->record[i] = (long)i + 1;
    circuit__st_rel(&me->flag, 1); /* release: our record before the flag */
    /* the pair: (our flag store, our load of the other's flag) */
    circuit__fence_sc();
    if (circuit__ld_acq(&me->other->flag) != 0) { /* acquire: then its record */
        me->saw_other = 1;
        for (int i = 0; i < 4; i++)
            me->copied += me->other->record[i];
    }
    return NULL;
}

static int dekker(void)
{
    enum { ROUNDS = 200 };
    int both = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        side a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        a.other = &b;
        b.other = &a;
        a.start = b.start = &start;
        pthread_t ta, tb;
        pthread_create(&ta, NULL, dekker_side, &a);
        pthread_create(&tb, NULL, dekker_side, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&start);
        if (!a.saw_other && !b.saw_other) {
            printf("fence-canary dekker: round %d: neither side saw the other's flag\n", round);
            return 1;
        }
        if ((a.saw_other && a.copied != 10) || (b.saw_other && b.copied != 10)) {
            printf("fence-canary dekker: round %d: a record read incomplete\n", round);
            return 1;
        }
        both += a.saw_other && b.saw_other;
    }
    printf("fence-canary dekker: %d rounds, at least one side saw the other in each (both: %d)\n",
           ROUNDS, both);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "missing-edge") == 0)
        return missing_edge();
    if (argc == 2 && strcmp(argv[1], "dekker") == 0)
        return dekker();
    fprintf(stderr, "usage: %s missing-edge|dekker\n", argv[0]);
    return 2;
}
