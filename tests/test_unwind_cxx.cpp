// O5 and P3 with C++ exceptions: thrown from observe, from classify, and
// through a guarded scope between allow and done. The core is C built with
// -fexceptions, so an exception unwinds through its frames and runs the
// cleanups (the delivery hand-off, CIRCUIT_TICKET_GUARD).
#include <criterion/criterion.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "circuit.h"
#include "testing.h"

namespace {

constexpr int64_t kT0 = INT64_C(1000000000);
constexpr int64_t kOpenFor = 1000;
constexpr int64_t kProbeTo = 500;
constexpr int kOk = 0, kFail = 1;

struct Thrown : std::runtime_error {
    Thrown() : std::runtime_error("thrown by a callback") {}
};

struct Fx {
    circuit_breaker *b = nullptr;
    circuit_transition log[64];
    int64_t delivered = 0;
    int64_t order_errors = 0;
    int64_t trip_calls = 0, probe_calls = 0, classify_calls = 0;
    circuit_counts last_probe{};
    circuit_counts last_trip{};
    int throw_in_observe_at = 0; // throw while delivering this generation (0: never)
    bool nested_in_observe = false;
    bool throw_in_classify = false;
    uint64_t last_gen = 0;
    circuit_state last_to = CIRCUIT_CLOSED;
};

bool trip(void *arg, const circuit_counts *c)
{
    Fx *f = static_cast<Fx *>(arg);
    f->trip_calls++;
    f->last_trip = *c;
    return c->consecutive_failures >= 2;
}

circuit_state probe(void *arg, const circuit_counts *c)
{
    Fx *f = static_cast<Fx *>(arg);
    f->probe_calls++;
    f->last_probe = *c;
    if (c->consecutive_failures > 0)
        return CIRCUIT_OPEN;
    return c->consecutive_successes >= 2 ? CIRCUIT_CLOSED : CIRCUIT_HALF_OPEN;
}

circuit_outcome classify(void *arg, void *, int result)
{
    Fx *f = static_cast<Fx *>(arg);
    f->classify_calls++;
    if (f->throw_in_classify)
        throw Thrown();
    return result == kOk ? CIRCUIT_SUCCESS : CIRCUIT_FAILURE;
}

bool call(Fx *f, int result)
{
    circuit_ticket t;
    cr_assert(circuit_allow(f->b, nullptr, &t, nullptr));
    return circuit_done(&t, result);
}

void observe(void *arg, void *, const circuit_transition *t)
{
    Fx *f = static_cast<Fx *>(arg);
    if (t->generation != f->last_gen + 1 || t->from != f->last_to)
        f->order_errors++;
    f->last_gen = t->generation;
    f->last_to = t->to;
    if (f->delivered < 64)
        f->log[f->delivered] = *t;
    f->delivered++;
    if (f->throw_in_observe_at != 0 && t->generation == (uint64_t)f->throw_in_observe_at) {
        f->throw_in_observe_at = 0;
        if (f->nested_in_observe) {
            // two more transitions, made while this one is being delivered
            circuit_test_clock_advance(kOpenFor);
            call(f, kOk); // open -> half-open
            call(f, kOk); // half-open -> closed
        }
        throw Thrown();
    }
}

void make(Fx *f, int probes)
{
    circuit_spec s;
    std::memset(&s, 0, sizeof s);
    s.config.window = 8;
    s.config.probes = probes;
    s.config.open_for_ns = kOpenFor;
    s.config.probe_timeout_ns = kProbeTo;
    s.policy.trip = trip;
    s.policy.probe = probe;
    s.policy.arg = f;
    s.classify = classify;
    s.classify_arg = f;
    s.observe = observe;
    s.observe_arg = f;
    char err[128];
    cr_assert_eq(circuit_new(&f->b, &s, err, sizeof err), 0, "%s", err);
    circuit_test_clock_set(kT0);
}

void open_then_due(Fx *f)
{
    call(f, kFail);
    call(f, kFail);
    cr_assert_eq(circuit_get_state(f->b), CIRCUIT_OPEN);
    circuit_test_clock_set(kT0 + kOpenFor);
}

} // namespace

Test(unwind_cxx, O5_exception_from_observe_leaves_the_rest_to_the_next_call)
{
    Fx f;
    make(&f, 1);
    f.throw_in_observe_at = 1;
    f.nested_in_observe = true;
    call(&f, kFail);
    bool caught = false;
    try {
        call(&f, kFail); // trips; observe makes 2 more, then throws
    } catch (const Thrown &) {
        caught = true;
    }
    cr_assert(caught, "the exception did not come through circuit_done");
    cr_assert_eq(f.delivered, 1);
    cr_assert_eq(circuit_test_pending(f.b), 2);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    // the next call delivers the rest, in order, and everything keeps working
    circuit_ticket t;
    cr_assert(circuit_allow(f.b, nullptr, &t, nullptr));
    cr_assert_eq(f.delivered, 3);
    cr_assert_eq(f.log[1].from, CIRCUIT_OPEN);
    cr_assert_eq(f.log[1].to, CIRCUIT_HALF_OPEN);
    cr_assert_eq(f.log[2].to, CIRCUIT_CLOSED);
    cr_assert(circuit_done(&t, kFail));
    call(&f, kFail);
    cr_assert_eq(f.delivered, 4);
    cr_assert_eq(f.log[3].generation, 4u);
    cr_assert_eq(f.order_errors, 0);
    cr_assert_eq(circuit_test_pending(f.b), 0);
    circuit_free(f.b);
}

Test(unwind_cxx, O5_P3_exception_from_observe_out_of_allow_releases_the_guarded_probe)
{
    Fx f;
    make(&f, 1);
    open_then_due(&f);
    f.throw_in_observe_at = 2; // open -> half-open, made by the allow below
    bool caught = false;
    try {
        CIRCUIT_TICKET_GUARD(t);
        if (circuit_allow(f.b, nullptr, &t, nullptr))
            circuit_done(&t, kOk);
    } catch (const Thrown &) {
        caught = true;
    }
    cr_assert(caught);
    cr_assert_eq(f.delivered, 2);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    circuit_ticket u, v;
    circuit_rejection rej;
    cr_assert(circuit_allow(f.b, nullptr, &u, &rej), "the guard did not free the probe slot");
    cr_assert_not(circuit_allow(f.b, nullptr, &v, &rej));
    cr_assert_eq(f.probe_calls, 0);
    cr_assert(circuit_done(&u, kOk));
    call(&f, kOk);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    cr_assert_eq(f.order_errors, 0);
    circuit_free(f.b);
}

Test(unwind_cxx, P3_exception_between_allow_and_done_frees_the_slot_and_counts_nothing)
{
    Fx f;
    make(&f, 1);
    open_then_due(&f);
    for (int i = 0; i < 3; i++) {
        bool caught = false;
        try {
            CIRCUIT_TICKET_GUARD(t);
            cr_assert(circuit_allow(f.b, nullptr, &t, nullptr), "round %d: slot still held", i);
            throw Thrown(); // the call failed in the caller's own code
        } catch (const Thrown &) {
            caught = true;
        }
        cr_assert(caught);
    }
    cr_assert_eq(f.probe_calls, 0);
    cr_assert_eq(f.classify_calls, 2);
    cr_assert_eq(f.delivered, 2);
    // and while closed
    call(&f, kOk);
    call(&f, kOk);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    int64_t trips = f.trip_calls;
    try {
        CIRCUIT_TICKET_GUARD(t);
        cr_assert(circuit_allow(f.b, nullptr, &t, nullptr));
        throw Thrown();
    } catch (const Thrown &) {
    }
    cr_assert_eq(f.trip_calls, trips);
    circuit_free(f.b);
}

Test(unwind_cxx, T2_exception_from_classify_while_closed_counts_nothing)
{
    Fx f;
    make(&f, 1);
    call(&f, kFail);
    f.throw_in_classify = true;
    bool caught = false;
    try {
        CIRCUIT_TICKET_GUARD(t);
        cr_assert(circuit_allow(f.b, nullptr, &t, nullptr));
        circuit_done(&t, kFail);
    } catch (const Thrown &) {
        caught = true;
    }
    cr_assert(caught);
    f.throw_in_classify = false;
    cr_assert_eq(f.trip_calls, 1, "a result whose classify threw was counted");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_CLOSED);
    call(&f, kOk); // the breaker keeps counting: the run of failures ended here
    circuit_stats st;
    circuit_get_stats(f.b, &st);
    cr_assert_eq(st.counts.consecutive_successes, 1);
    cr_assert_eq(st.counts.failures, 1);
    cr_assert_eq(st.counts.successes, 1);
    call(&f, kFail);
    call(&f, kFail);
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_OPEN);
    cr_assert_eq(f.delivered, 1);
    circuit_free(f.b);
}

Test(unwind_cxx, P3_exception_from_classify_while_half_open_frees_the_probe_slot)
{
    Fx f;
    make(&f, 1);
    open_then_due(&f);
    f.throw_in_classify = true;
    bool caught = false;
    try {
        CIRCUIT_TICKET_GUARD(t);
        cr_assert(circuit_allow(f.b, nullptr, &t, nullptr));
        circuit_done(&t, kOk);
    } catch (const Thrown &) {
        caught = true;
    }
    cr_assert(caught);
    f.throw_in_classify = false;
    cr_assert_eq(f.probe_calls, 0, "a result whose classify threw was counted");
    cr_assert_eq(circuit_get_state(f.b), CIRCUIT_HALF_OPEN);
    // the call never produced a result: its slot must not stay taken until
    // probe_timeout (and then count as a timeout)
    circuit_ticket u;
    circuit_rejection rej;
    bool admitted = circuit_allow(f.b, nullptr, &u, &rej);
    cr_assert(admitted, "the probe slot stays held after classify threw (rejected: %s)",
              circuit_state_name(rej.state));
    circuit_release(&u);
    circuit_test_clock_advance(kProbeTo);
    circuit_ticket v;
    cr_assert(circuit_allow(f.b, nullptr, &v, nullptr));
    cr_assert_eq(f.probe_calls, 0, "the abandoned probe was later counted as a timeout");
    circuit_release(&v);
    circuit_free(f.b);
}
