#!/usr/bin/env python3
"""Check that the rule ids the tree cites and the ids docs/CONTRACT.md
defines agree (ctest: rule_ids).

  1. Every rule id cited in include/, src/, tests/ or README.md is defined in
     docs/CONTRACT.md.
  2. Every id defined there is named by at least one test: a Criterion test
     (suite or test name), a ctest name (add_test in tests/), or the name of a
     source file under tests/ (test_l3_race.c names L3). A name cites the ids
     among its '_'-separated words: T6_P1_allow_stopped... names T6 and P1.

An id is a family (CFG, TM, OP, AT, S, C, T, P, O, L, B, K, M, V) and a number,
standing alone: "SPEC C1", "(T7)", "C1_window_covers...", "O1-O6" (a range
cites every id in it). Not ids: a compiler flag (-O3), a hex digit run, and
the few words listed in NOT_IDS.

usage: check_rule_ids.py [--root DIR] [--verbose]   check DIR (default: ..)
       check_rule_ids.py --self-test                 prove the check can fail
Exit status: 0 when both hold, 1 otherwise (each problem listed), 2 on a
usage or I/O error.
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

FAMILY = r"(?:CFG|TM|OP|AT|S|C|T|P|O|L|B|K|M|V)"
# Before an id: not a letter, digit, '-' (a flag such as -O3) or '.'.
# '_' is allowed so that ids inside test names are seen (unit_L3_race).
LEFT = r"(?<![A-Za-z0-9.\-])"
RIGHT = r"(?![A-Za-z0-9])"
RANGE_RE = re.compile(LEFT + r"(" + FAMILY + r")(\d+)\s*(?:-|\u2013|\.\.)\s*(?:(" + FAMILY
                      + r"))?(\d+)" + RIGHT)
ID_RE = re.compile(LEFT + r"(" + FAMILY + r")(\d+)" + RIGHT)
DEFINE_RE = re.compile(r"^- \*\*(" + FAMILY + r"\d+)\*\*")
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
    defined = {}
    problems = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        m = DEFINE_RE.match(line)
        if m:
            if m.group(1) in defined:
                print(f"{CONTRACT}:{lineno}: {m.group(1)} defined twice "
                      f"(first at line {defined[m.group(1)]})", file=out)
                problems += 1
            defined.setdefault(m.group(1), lineno)
    if not defined:
        print(f"{CONTRACT}: defines no rule id (expected lines '- **C1** ...')", file=out)
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
    untested = [i for i in sorted(defined, key=sort_key) if i not in tested]
    for ident in untested:
        print(f"defined but named by no test: {ident} ({CONTRACT}:{defined[ident]})", file=out)
        problems += 1

    if verbose:
        for ident in sorted(defined, key=sort_key):
            names = tested.get(ident, [])
            print(f"  {ident:5} {len(names):3} test(s)" + (f", e.g. {names[0]}" if names else ""),
                  file=out)
    print(f"rule ids: {len(defined)} defined, {len(defined) - len(untested)} named by tests, "
          f"{len(untested)} untested, {len(undefined)} cited but undefined", file=out)
    return 1 if problems else 0


def sort_key(ident):
    m = re.match(r"([A-Z]+)(\d+)$", ident)
    order = ["CFG", "S", "C", "T", "P", "TM", "O", "L", "OP", "B", "K", "M"]
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

    contract = "# rules\n- **C1** one.\n- **C2** two.\n- **L3** three.\n"
    good = {
        CONTRACT: contract,
        "include/circuit.h": "/* C1, SPEC C2; built with -O3 for C11; see (C1-C2) */\n",
        "tests/test_counts.c": "Test(counts, C1_window) {}\nTest(counts, C2_runs) {}\n",
        "tests/test_l3_race.c": "int main(void) { return 0; } /* T0 */\n",
    }
    cases = [
        ("consistent tree", good, 0),
        ("an undefined id in src/", dict(good, **{"src/x.c": "/* C9 */\n"}), 1),
        ("an undefined id inside a range", dict(good, **{"README.md": "C1-C3\n"}), 1),
        ("an id no test names", dict(good, **{CONTRACT: contract + "- **C3** more.\n"}), 1),
        ("an id defined twice", dict(good, **{CONTRACT: contract + "- **C1** again.\n"}), 1),
        ("a ctest name covers an id",
         dict(good, **{CONTRACT: contract + "- **M1** stats.\n",
                       "tests/x.cmake": "add_test(NAME unit_M1_stats COMMAND x)\n"}), 0),
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
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--verbose", action="store_true", help="list every id with its tests")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        print(f"no such directory: {args.root}", file=sys.stderr)
        return 2
    return check(os.path.abspath(args.root), args.verbose)


if __name__ == "__main__":
    sys.exit(main())
