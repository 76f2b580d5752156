/*
 * Configuration checks (CFG1, CFG2, K1): circuit__validate, which circuit_new
 * calls before it allocates anything. The message shape is message.h's.
 */
#include <errno.h>
#include <inttypes.h>

#include "internal.h"

/* ---- CFG1, CFG2, K1 ----------------------------------------------------------- */

/* The policy's complaint is written into this much scratch space; a longer
 * one is cut (policy.check is told the size). */
#define CIRCUIT__CHECK_MSG_MAX 512

/*
 * K1: policy->check, when set, is called exactly once, and it is called even
 * when the config has invalid fields, so that the caller reads every
 * complaint in one message (a check must therefore cope with any field
 * value; it sees the config as given, nothing corrected). Its EINVAL answer
 * becomes the last clause, "policy: <its text>"; its 0 adds nothing; any
 * other answer is a programming error and aborts, naming the value.
 */
int circuit__validate(const circuit_config *cfg, const circuit_policy *policy, char *errbuf,
                      size_t errbuf_len)
{
    circuit__msg m;
    circuit__msg_start(&m, errbuf, errbuf_len, "circuit_config");
    if (cfg->window < 1 || cfg->window > CIRCUIT_MAX_COUNT)
        circuit__msg_add(&m, "window = %d (must be 1..%d)", cfg->window, CIRCUIT_MAX_COUNT);
    if (cfg->probes < 1 || cfg->probes > CIRCUIT_MAX_COUNT)
        circuit__msg_add(&m, "probes = %d (must be 1..%d)", cfg->probes, CIRCUIT_MAX_COUNT);
    if (cfg->open_for_ns <= 0)
        circuit__msg_add(&m, "open_for_ns = %" PRId64 " (must be > 0)", cfg->open_for_ns);
    if (cfg->probe_timeout_ns <= 0)
        circuit__msg_add(&m, "probe_timeout_ns = %" PRId64 " (must be > 0)",
                         cfg->probe_timeout_ns);
    if (policy && policy->check) {
        char said[CIRCUIT__CHECK_MSG_MAX];
        said[0] = '\0';
        int rc = policy->check(policy->arg, cfg, said, sizeof said);
        said[sizeof said - 1] = '\0'; /* in case the check forgot the NUL */
        if (rc == EINVAL)
            circuit__msg_add(&m, "policy: %s",
                             said[0] ? said : "refused by policy.check (no reason given)");
        else if (rc != 0)
            circuit__abort("circuit_new: policy.check returned %d; it must return 0 (accept) or "
                           "EINVAL (%d, refuse)",
                           rc, EINVAL);
    }
    return circuit__msg_end(&m);
}
