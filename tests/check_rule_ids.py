#!/usr/bin/env python3
"""Check that the rule ids the tree cites and the ids docs/CONTRACT.md
defines agree (ctest: rule_ids), and write the rule -> test index
(docs/RULES-INDEX.md; ctest rule_index checks that it is current).

  1. Every rule id cited in include/, src/, tests/ or README.md is defined in
     docs/CONTRACT.md, one heading per rule ("### C1").
  2. Every id defined there is named by at least one test: a Criterion test
     (suite or test name), a ctest name (add_test in tests/), or the name of a
     source file under tests/ (test_l3_race.c names L3). A name cites the ids
     among its '_'-separated words: T6_P1_allow_stopped... names T6 and P1.
     A rule marked "Status: to be built" (under its own heading, or under its
     section's heading for every rule of the section) may have no test yet.

An id is a family (CFG, TM, OP, AT, SH, NX, S, C, T, P, O, L, B, K, M, V) and
a number, standing alone: "CONTRACT C1", "(T7)", "C1_window_covers...", "O1-O6"
(a range cites every id in it). Not ids: a compiler flag (-O3), a hex digit
run, and the few words listed in NOT_IDS.

usage: check_rule_ids.py [--root DIR] [--verbose]   check DIR (default: ..)
       check_rule_ids.py --index FILE                write the rule -> test index
       check_rule_ids.py --check-index FILE          fail when FILE is not current
       check_rule_ids.py --self-test                 prove the check can fail
FILE is relative to DIR. Exit status: 0 when both hold (or the index is
current), 1 otherwise (each problem listed), 2 on a usage or I/O error.
"""

import argparse
import os
import re
import sys
import tempfile

CONTRACT = os.path.join("docs", "CONTRACT.md")
SCANNED = ["include", "src", "tests", "README.md"]
TEXT_SUFFIXES = {".c", ".h", ".cpp", ".hpp", ".cc", ".txt", ".cmake", ".in", ".sh",
                 ".py", ".md", ".pml", ".lua", ".json", ".supp", ".awk", ".gp"}

# Tokens shaped like an id that are not rule ids.
NOT_IDS = {
    "T0": "tests/helpers.h: the time every time-driven test starts at",
    "C11": "the C standard", "C99": "the C standard", "C17": "the C standard",
    "C23": "the C standard", "C89": "the C standard",
}

FAMILY = r"(?:CFG|TM|OP|AT|SH|NX|S|C|T|P|O|L|B|K|M|V)"
# Before an id: not a letter, digit, '-' (a flag such as -O3) or '.'.
# '_' is allowed so that ids inside test names are seen (unit_L3_race).
LEFT = r"(?<![A-Za-z0-9.\-])"
RIGHT = r"(?![A-Za-z0-9])"
RANGE_RE = re.compile(LEFT + r"(" + FAMILY + r")(\d+)\s*(?:-|\u2013|\.\.)\s*(?:(" + FAMILY
                      + r"))?(\d+)" + RIGHT)
ID_RE = re.compile(LEFT + r"(" + FAMILY + r")(\d+)" + RIGHT)
DEFINE_RE = re.compile(r"^### (" + FAMILY + r"\d+)\s*$")
SECTION_RE = re.compile(r"^## ")
PENDING_RE = re.compile(r"^Status: to be built")
SELF = os.path.abspath(__file__)
WORD_ID_RE = re.compile(r"^" + FAMILY + r"\d+$")

CRITERION_RE = re.compile(r"\b(?:Test|Theory)\s*\(\s*(\w+)\s*,\s*(\w+)")
CRITERION_PARAM_RE = re.compile(r"\bParameterizedTest\s*\([^,()]*,\s*(\w+)\s*,\s*(\w+)")
ADD_TEST_RE = re.compile(r"\badd_test\s*\(\s*(?:NAME\s+)?([^\s()]+)")


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        return None


def scanned_files(root):
    """Text files under the scanned paths, sorted, as (relpath, abspath)."""
    out = []
    for top in SCANNED:
        p = os.path.join(root, top)
        if os.path.isfile(p):
            out.append((top, p))
            continue
        for d, dirs, files in os.walk(p):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
            for name in sorted(files):
                suffix = os.path.splitext(name)[1]
                full = os.path.join(d, name)
                if os.path.samefile(full, SELF):
                    continue  # its self-test cites made-up ids on purpose
                if suffix in TEXT_SUFFIXES or name == "CMakeLists.txt":
                    out.append((os.path.relpath(full, root), full))
    return out


def cited_ids(text):
    """Yield (id, line) for every id cited in text, ranges expanded."""
    for lineno, line in enumerate(text.splitlines(), 1):
        covered = []
        for m in RANGE_RE.finditer(line):
            fam, lo, fam2, hi = m.group(1), int(m.group(2)), m.group(3), int(m.group(4))
            if fam2 not in (None, fam) or hi < lo or hi - lo > 50:
                continue  # "T6-P1" or "C1-0": not a range
            covered.append((m.start(), m.end()))
            for n in range(lo, hi + 1):
                yield f"{fam}{n}", lineno
        for m in ID_RE.finditer(line):
            if any(a <= m.start() < b for a, b in covered):
                continue
            ident = m.group(1) + m.group(2)
            if ident not in NOT_IDS:
                yield ident, lineno


def ids_in_name(name):
    """Rule ids among the '_'-, '.'- and '-'-separated words of a name."""
    return {w.upper() for w in re.split(r"[_.\-]", name) if WORD_ID_RE.match(w.upper())}


def test_names(root):
    """Yield (id, where) for every id named by a test."""
    for rel, full in scanned_files(root):
        if not rel.startswith("tests" + os.sep):
            continue
        name = os.path.basename(rel)
        if name.endswith((".c", ".cpp", ".cc", ".sh", ".py", ".pml")):
            for i in ids_in_name(os.path.splitext(name)[0]):
                yield i, f"file {rel}"
        text = read_text(full)
        if text is None:
            continue
        if name.endswith((".c", ".cpp", ".cc")):
            for rx in (CRITERION_RE, CRITERION_PARAM_RE):
                for m in rx.finditer(text):
                    for word in (m.group(1), m.group(2)):
                        for i in ids_in_name(word):
                            yield i, f"test {m.group(1)}/{m.group(2)} ({rel})"
        if name == "CMakeLists.txt" or name.endswith(".cmake"):
            for m in ADD_TEST_RE.finditer(text):
                for i in ids_in_name(m.group(1).replace("${", " ").replace("}", " ")):
                    yield i, f"ctest {m.group(1)} ({rel})"


def check(root, verbose=False, out=sys.stdout):
    contract = os.path.join(root, CONTRACT)
    text = read_text(contract) if os.path.isfile(contract) else None
    if text is None:
        print(f"rule ids: {CONTRACT} not found under {root}", file=out)
        return 1
    defined, pending, twice = parse_contract(text)
    problems = 0
    for ident, lineno in twice:
        print(f"{CONTRACT}:{lineno}: {ident} defined twice "
              f"(first at line {defined[ident]})", file=out)
        problems += 1
    if not defined:
        print(f"{CONTRACT}: defines no rule id (expected headings '### C1')", file=out)
        return 1

    undefined = {}
    for rel, full in scanned_files(root):
        body = read_text(full)
        if body is None:
            continue
        for ident, lineno in cited_ids(body):
            if ident not in defined:
                undefined.setdefault(ident, []).append(f"{rel}:{lineno}")
    for ident in sorted(undefined, key=sort_key):
        where = undefined[ident]
        more = f" and {len(where) - 5} more" if len(where) > 5 else ""
        print(f"cited but not defined in {CONTRACT}: {ident} at {', '.join(where[:5])}{more}",
              file=out)
        problems += 1

    tested = {}
    for ident, where in test_names(root):
        tested.setdefault(ident, []).append(where)
    untested = [i for i in sorted(defined, key=sort_key) if i not in tested and i not in pending]
    for ident in untested:
        print(f"defined but named by no test: {ident} ({CONTRACT}:{defined[ident]})", file=out)
        problems += 1
    for ident in sorted(pending, key=sort_key):
        if ident in tested:
            print(f"note: {ident} is marked 'Status: to be built' ({CONTRACT}:{pending[ident]}) "
                  f"but tests name it now: drop the mark", file=out)

    if verbose:
        for ident in sorted(defined, key=sort_key):
            names = tested.get(ident, [])
            print(f"  {ident:5} {len(names):3} test(s)" + (f", e.g. {names[0]}" if names else ""),
                  file=out)
    waiting = [i for i in pending if i not in tested]
    print(f"rule ids: {len(defined)} defined, {len(defined) - len(untested) - len(waiting)} "
          f"named by tests, {len(waiting)} to be built, {len(untested)} untested, "
          f"{len(undefined)} cited but undefined", file=out)
    return 1 if problems else 0


def parse_contract(text):
    """The rules CONTRACT.md defines: ({id: line}, {pending id: line of its
    mark}, [(id defined again, line)]). A 'Status: to be built' line marks
    the rule whose heading it follows, or, before the first rule of a
    section, every rule of that section."""
    defined, pending, twice = {}, {}, []
    section_mark = None
    current = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if SECTION_RE.match(line):
            section_mark, current = None, None
            continue
        m = DEFINE_RE.match(line)
        if m:
            current = m.group(1)
            if current in defined:
                twice.append((current, lineno))
            defined.setdefault(current, lineno)
            if section_mark is not None:
                pending.setdefault(current, section_mark)
            continue
        if PENDING_RE.match(line):
            if current is None:
                section_mark = lineno
            else:
                pending.setdefault(current, lineno)
    return defined, pending, twice


INDEX_HEAD = """# Rule -> test index

Which tests name each rule of [CONTRACT.md](CONTRACT.md). Generated from the
tests' names: do not edit. After adding, renaming or removing a test, run

    python3 tests/check_rule_ids.py --index docs/RULES-INDEX.md

(the ctest `rule_index` fails while this file is not current).

| rule | tests |
| --- | --- |
"""


def index_text(root):
    """The index as text, or None when CONTRACT.md cannot be read."""
    contract = os.path.join(root, CONTRACT)
    text = read_text(contract) if os.path.isfile(contract) else None
    if text is None:
        return None
    defined, pending, _ = parse_contract(text)
    tested = {}
    for ident, where in test_names(root):
        tested.setdefault(ident, set()).add(where.replace(os.sep, "/"))
    rows = []
    for ident in defined:  # the contract's order
        names = sorted(tested.get(ident, ()))
        if names:
            cell = "<br>".join(f"`{n}`" for n in names)
        else:
            cell = "to be built" if ident in pending else "**none**"
        rows.append(f"| {ident} | {cell} |\n")
    return INDEX_HEAD + "".join(rows)


def write_index(root, rel, out=sys.stdout):
    body = index_text(root)
    if body is None:
        print(f"rule index: {CONTRACT} not found under {root}", file=out)
        return 2
    with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
        f.write(body)
    print(f"rule index: wrote {rel}", file=out)
    return 0


def check_index(root, rel, out=sys.stdout):
    body = index_text(root)
    if body is None:
        print(f"rule index: {CONTRACT} not found under {root}", file=out)
        return 2
    path = os.path.join(root, rel)
    have = read_text(path) if os.path.isfile(path) else None
    if have == body:
        print(f"rule index: {rel} is current", file=out)
        return 0
    print(f"rule index: {rel} is not current (tests or rules changed); regenerate it with\n"
          f"    python3 tests/check_rule_ids.py --index {rel}", file=out)
    return 1


def sort_key(ident):
    m = re.match(r"([A-Z]+)(\d+)$", ident)
    order = ["CFG", "S", "C", "T", "P", "TM", "O", "L", "OP", "B", "K", "M", "V", "SH", "NX",
             "AT"]
    fam = m.group(1)
    return (order.index(fam) if fam in order else len(order), fam, int(m.group(2)))


def self_test():
    """The check passes on a consistent tree and fails on each kind of gap."""
    def tree(files):
        d = tempfile.mkdtemp(prefix="rule-ids-")
        for rel, body in files.items():
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w", encoding="utf-8") as f:
                f.write(body)
        return d

    contract = "# rules\n## counts\n### C1\none.\n### C2\ntwo.\n### L3\nthree.\n"
    good = {
        CONTRACT: contract,
        "include/circuit.h": "/* C1, CONTRACT C2; built with -O3 for C11; see (C1-C2) */\n",
        "tests/test_counts.c": "Test(counts, C1_window) {}\nTest(counts, C2_runs) {}\n",
        "tests/test_l3_race.c": "int main(void) { return 0; } /* T0 */\n",
    }
    cases = [
        ("consistent tree", good, 0),
        ("an undefined id in src/", dict(good, **{"src/x.c": "/* C9 */\n"}), 1),
        ("an undefined id inside a range", dict(good, **{"README.md": "C1-C3\n"}), 1),
        ("an id no test names", dict(good, **{CONTRACT: contract + "### C3\nmore.\n"}), 1),
        ("an id defined twice", dict(good, **{CONTRACT: contract + "### C1\nagain.\n"}), 1),
        ("a ctest name covers an id",
         dict(good, **{CONTRACT: contract + "### M1\nstats.\n",
                       "tests/x.cmake": "add_test(NAME unit_M1_stats COMMAND x)\n"}), 0),
        ("a rule to be built needs no test",
         dict(good, **{CONTRACT: contract + "### C3\nStatus: to be built.\nmore.\n"}), 0),
        ("a section to be built needs no test",
         dict(good, **{CONTRACT: contract + "## shared\nStatus: to be built.\n"
                                            "### SH1\none.\n### SH2\ntwo.\n"}), 0),
        ("the mark covers its own section only",
         dict(good, **{CONTRACT: "# rules\n## shared\nStatus: to be built.\n### SH1\none.\n"
                                 "## counts\n### C1\none.\n### C2\ntwo.\n### L3\nthree.\n"
                                 "### C3\nmore.\n"}), 1),
        ("an old-style definition is not a rule",
         dict(good, **{CONTRACT: "# rules\n- **C1** one.\n"}), 1),
    ]
    failed = 0
    for title, files, want in cases:
        root = tree(files)
        sink = open(os.devnull, "w")
        got = check(root, out=sink)
        sink.close()
        status = "ok" if got == want else "WRONG"
        print(f"self-test: {title}: exit {got}, expected {want}: {status}")
        failed += got != want
    # The index: written, then current, then stale once a test is renamed.
    root = tree(good)
    sink = open(os.devnull, "w")
    steps = [("index written", write_index(root, "docs/RULES-INDEX.md", sink), 0),
             ("index current", check_index(root, "docs/RULES-INDEX.md", sink), 0)]
    with open(os.path.join(root, "tests/test_counts.c"), "a", encoding="utf-8") as f:
        f.write("Test(counts, C2_more) {}\n")
    steps.append(("index stale after a new test", check_index(root, "docs/RULES-INDEX.md", sink), 1))
    sink.close()
    for title, got, want in steps:
        status = "ok" if got == want else "WRONG"
        print(f"self-test: {title}: exit {got}, expected {want}: {status}")
        failed += got != want
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--verbose", action="store_true", help="list every id with its tests")
    ap.add_argument("--index", metavar="FILE", help="write the rule -> test index to FILE")
    ap.add_argument("--check-index", metavar="FILE", help="fail when FILE is not the current index")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        print(f"no such directory: {args.root}", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    if args.index:
        return write_index(root, args.index)
    if args.check_index:
        return check_index(root, args.check_index)
    return check(root, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
