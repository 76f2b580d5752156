/*
 * The per-CPU lines: the cells' first epoch and epoch ids (the cells'
 * protocol is in counting.c, with the exact points that read them).
 */
#include "percpu.h"

void circuit__pcpu_init(circuit_breaker *b)
{
    /* Before the breaker is shared: the cells of the first epoch (0) and
     * the word naming it, at exact point 0. */
    for (uint32_t i = 0; i < b->ncpu; i++)
        b->pcpu[i].cell = 0; /* {unsealed, epoch 0, count 0} */
    b->next_id = 0;
    /* D_0: the first closed state's first point (word.h) */
    b->k_next = 0;
    circuit__st128_init(&b->desc[0], circuit__desc_zero(0));
    circuit__st128_init(&b->core, (circuit__u128){circuit__mkclo(0, 0, false, false, 0),
                                                  circuit__mkchi(0, 0)});
    /* the closed mirror (word.h), open for that state, version 0 */
    circuit__st128_init(&b->mirror,
                        (circuit__u128){circuit__mirror_of(circuit__mkclo(0, 0, false, false, 0)), 0});
}

uint32_t circuit__fresh_epoch(circuit_breaker *b)
{
    uint32_t id;
    do {
        CIRCUIT__SHARED_RMW();
        /* relaxed RMW: uniqueness is all it needs; ids are not dense */
        id = (uint32_t)((circuit__faa_rlx(&b->next_id, 1) + 1) & CIRCUIT__EPOCH_MASK);
    } while (id == 0);
    return id;
}
