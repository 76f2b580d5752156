/*
 * The text helpers of src/names.c: circuit_retry_after_s (whole
 * seconds for an HTTP Retry-After header) and the isolated state in
 * circuit_state_name / circuit_rejection_format (OP3's last sentence).
 * Pure functions, tested on hand-made rejections.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "circuit.h"

TestSuite(retry_after);

static int64_t secs(circuit_state st, int64_t ns)
{
    circuit_rejection r = {st, ns};
    errno = 0;
    return circuit_retry_after_s(&r);
}

Test(retry_after, open_rounds_up_to_whole_seconds)
{
    cr_assert_eq(secs(CIRCUIT_OPEN, 1), 1, "1 ns left: wait 1 s");
    cr_assert_eq(secs(CIRCUIT_OPEN, CIRCUIT_MS(999)), 1);
    cr_assert_eq(secs(CIRCUIT_OPEN, CIRCUIT_S(1)), 1, "exactly 1 s stays 1");
    cr_assert_eq(secs(CIRCUIT_OPEN, CIRCUIT_S(1) + 1), 2);
    cr_assert_eq(secs(CIRCUIT_OPEN, CIRCUIT_MS(29500)), 30);
    cr_assert_eq(secs(CIRCUIT_OPEN, CIRCUIT_S(30)), 30);
    cr_assert_eq(secs(CIRCUIT_OPEN, INT64_MAX), INT64_MAX / 1000000000 + 1,
                 "no overflow at the top");
    cr_assert_eq(errno, 0, "success leaves errno alone");
}

Test(retry_after, open_is_at_least_one_second)
{
    /* retry_after_ns is >= 1 in a real rejection; a 0 or negative one (a
     * hand-made struct) still never tells a client "retry now". */
    cr_assert_eq(secs(CIRCUIT_OPEN, 0), 1);
    cr_assert_eq(secs(CIRCUIT_OPEN, -5), 1);
}

Test(retry_after, half_open_is_one_second)
{
    cr_assert_eq(secs(CIRCUIT_HALF_OPEN, 0), 1, "a probe slot may free at any moment");
    cr_assert_eq(secs(CIRCUIT_HALF_OPEN, CIRCUIT_S(10)), 1, "retry_after_ns is not read");
}

Test(retry_after, isolated_is_zero_meaning_no_header)
{
    cr_assert_eq(secs(CIRCUIT_ISOLATED, 0), 0);
    cr_assert_eq(secs(CIRCUIT_ISOLATED, CIRCUIT_S(5)), 0, "an operator holds it: no time known");
}

Test(retry_after, invalid_is_minus_one_einval)
{
    errno = 0;
    cr_assert_eq(circuit_retry_after_s(NULL), -1);
    cr_assert_eq(errno, EINVAL);
    const circuit_state bad[] = {(circuit_state)0, CIRCUIT_CLOSED, (circuit_state)5,
                                 (circuit_state)-1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(secs(bad[i], CIRCUIT_S(1)), -1, "state %d", (int)bad[i]);
        cr_assert_eq(errno, EINVAL, "state %d", (int)bad[i]);
    }
}

Test(retry_after, OP3_state_name_and_rejection_format_name_the_isolated_state)
{
    cr_assert_str_eq(circuit_state_name(CIRCUIT_ISOLATED), "isolated");
    cr_assert_str_eq(circuit_state_name((circuit_state)5), "invalid");
    circuit_rejection r = {CIRCUIT_ISOLATED, 0};
    char buf[128];
    int n = circuit_rejection_format(&r, buf, sizeof buf);
    cr_assert_str_eq(buf, "circuit isolated by an operator: no retry time is known");
    cr_assert_eq(n, (int)strlen(buf));
    /* snprintf-like: the length of the full text, whatever fits */
    char small[9];
    cr_assert_eq(circuit_rejection_format(&r, small, sizeof small), n);
    cr_assert_str_eq(small, "circuit ");
    cr_assert_eq(circuit_rejection_format(&r, NULL, 0), n);
}
