/*
 * urcu-canary: the happens-before marks around liburcu's stack matter
 * (L3; liburcu 0.13).
 *
 * SPDX-License-Identifier: MIT
 *
 * Usage: urcu_canary plain|annotated
 *
 * The same hand-off the core makes in src/delivery.c: a producer thread fills
 * a record and pushes it on a liburcu lock-free stack (cds_lfs_push, in
 * liburcu-cds.so: its atomics are invisible to TSan); the main thread
 * detaches the stack (__cds_lfs_pop_all), walks it and reads the record.
 *   plain      no marks: TSan must report a data race on the record
 *              (ctest: PASS_REGULAR_EXPRESSION) - proof that liburcu's own
 *              ordering is invisible to it, so the core's marks are needed;
 *   annotated  __tsan_release before the push, __tsan_acquire on each node
 *              BEFORE anything of it is read (its `next` link included):
 *              TSan must stay silent (exit 0).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu/compiler.h>
#include <urcu/lfstack.h>

void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

typedef struct record {
    struct cds_lfs_node lfs;
    long payload[4];
} record;

static struct __cds_lfs_stack stack;
static int annotated;
#define N 64

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) {
        record *r = malloc(sizeof *r);
        if (!r)
            abort();
        cds_lfs_node_init(&r->lfs);
        for (int k = 0; k < 4; k++)
            r->payload[k] = i * 10 + k;
        if (annotated)
            __tsan_release(r);
        cds_lfs_push(&stack, &r->lfs);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "plain") && strcmp(argv[1], "annotated"))) {
        fprintf(stderr, "usage: urcu_canary plain|annotated\n");
        return 2;
    }
    annotated = !strcmp(argv[1], "annotated");
    __cds_lfs_init(&stack);
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    long sum = 0;
    int got = 0;
    while (got < N) {
        struct cds_lfs_head *head = __cds_lfs_pop_all(&stack);
        for (struct cds_lfs_node *it = head ? &head->node : NULL, *next; it; it = next) {
            record *r = caa_container_of(it, record, lfs);
            if (annotated)
                __tsan_acquire(r);
            next = it->next;
            sum += r->payload[0] + r->payload[3];
            free(r);
            got++;
        }
    }
    pthread_join(t, NULL);
    printf("urcu-canary %s: %d records, sum %ld\n", argv[1], got, sum);
    return 0;
}
