# The planted bugs of the schedule checker (docs/CONTRACT.md V4,
# tests/sched/PLANTS.md), one entry each:
#   NAME:sources:scenario:arguments
# NAME: the CIRCUIT_PLANT_<NAME> switch that brings the defect back;
# sources: the files compiled with it ("a.c+b.c"; "*": a header's plant, every
# source); scenario and arguments ("+" between words): the checker's run
# that must catch it (schedule.planted.<name> passes when it does).
# Each caught plant runs the one strategy that catches it first, with a run
# budget above the run that catches it (runs are deterministic by seed, so
# the catch does not depend on the machine's speed; the time limit is only
# a guard): tests/sched/PLANTS.md lists, per strategy, the run that catches.
set(CIRCUIT_SCHED_PLANTS
  "PHANTOM_PROBE:timeouts.c:phantom:--strategy+random+--runs+50+--seconds+200"
  "PIF_RESERVATION:probes.c:phantom_read:--strategy+pct+--runs+50+--seconds+200"
  "SCAN_RESERVATION:timeouts.c:phantom:--strategy+pct+--runs+50+--seconds+200"
  "NO_ADOPT:probes.c:phantom:--strategy+pct+--runs+50+--seconds+200"
  "RESERVE_STALE_DUE:probes.c:stale_due:--strategy+pct+--runs+200+--seconds+200"
  "HALFOPEN_ALIAS_WINDOW:probes.c:seam_window:--strategy+pct+--runs+50+--seconds+200"
  "HALFOPEN_ALIAS_SLOTS:probes.c:generation_seam:--strategy+pct+--runs+50+--seconds+200"
  "TIMEOUT_FREE_THEN_COUNT:timeouts.c:halfopen_probes:--strategy+pct+--runs+50+--seconds+200"
  "STATS_GEN_WIDEN:word.c:closed_trip:--strategy+pct+--runs+50+--seconds+200"
  "PROBE_STALE_CLOCK:closed.c+halfopen.c:operator:--strategy+pct+--runs+3000+--seconds+200"
  "INTENT_CALL_CTX:closed.c:operator:--strategy+random+--runs+300+--seconds+200"
  "DESC_TAG14:*:descriptor_tags:--strategy+pct+--runs+1000+--seconds+200"
  "PASSING_BIT:probes.c:probes_two:--strategy+pct+--runs+300+--seconds+200"
  "SHARED_NO_MAKERS:delivery.c:shared_two_threads:--strategy+pct+--runs+50+--seconds+200"
  "TICKET_GEN27:*:high_tag:--strategy+random+--runs+50+--seconds+200"
  "TAKE_TWO_STEPS:probes.c:probe_death:--strategy+dfs+--runs+300+--seconds+200"
  "FREE_DUE_FIRST:probes.c:probe_death:--strategy+dfs+--runs+300+--seconds+200"
  "HINT_UNCAPPED:timeouts.c:probe_death_scan:--strategy+random+--runs+4000+--seconds+200"
)
# Planted (src/, tests/sched/PLANTS.md) but not caught by any scenario in
# 3 x 3 000 schedules; not built by default. Why, per plant, in PLANTS.md:
# RESET_INTENT_EALREADY's history is linearizable (the fix chose one of two
# legal orders); INTENT_STALE_MAKER hides inside O6's stated limit, which
# the oracle accepts; OPERATOR_STALE_CLOCK needs a tick between a clock read
# and a CAS that wins, the window finding F2 leaves to the oracle;
# STATS_MOVED_RING is not shown to be a defect by any test; SCAN_FIXED_DUE
# needs three preemptions (DFS is bounded at 2; race.probes.P1_TM2_raised_due
# catches it with park points); CLAIM_UNFROZEN needs a raise stopped across
# a transition and a claim (three preemptions too; race.probes.P1_TM2_raised_
# due_after_the_claim catches it); HINT_AFTER_ONLY delays a dead slow
# admitter's timeout, never past the run's clock + probe_timeout where the
# finale looks (unit_sh_shared's SH2_P1_killed_after_a_slow_take_past_a_
# raised_hint catches it); STATE_READ_STALE's stale answer is one the
# default oracle accepts (a call may act at any clock value of its run;
# --monotone-time would reject it, and F2 with it); ACQ_RESTART is
# an ordering bug, and threads running one at a time see sequentially
# consistent executions only (the aarch64 ordering check covers it).
set(CIRCUIT_SCHED_PLANTS_NOT_CAUGHT
  RESET_INTENT_EALREADY INTENT_STALE_MAKER OPERATOR_STALE_CLOCK STATS_MOVED_RING SCAN_FIXED_DUE
  STATE_READ_STALE ACQ_RESTART HINT_AFTER_ONLY CLAIM_UNFROZEN
)
