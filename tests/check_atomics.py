#!/usr/bin/env python3
"""docs/CONTRACT.md L7: one atomics vocabulary, with the memory order in every name.

Checks the core's sources (src/*.c, src/*.h):
  - no atomic primitive is used outside src/atomics.h: no __atomic_* or
    __sync_* builtin, no ck_pr_* call, no <stdatomic.h> (src/testing.c,
    compiled only into the test build, is the exception);
  - every call of the vocabulary names its order: circuit__ld_*, _st_*,
    _cas_*, _faa_*, _ld128_*, _cas128_* all end in one of
    rlx / acq / rel / acq_rel / sc;
  - src/atomics.h uses the __atomic builtins for every 8-byte operation in
    every build (no TSan-only branch around them), so the TSan build runs the
    shipped code;
  - the build refuses an unknown CPU (#error in atomics.h);
  - every call site gives its reason: a comment on the call's line, or one
    that ends at most two code lines above it (a run of consecutive call
    lines, such as a sum of totals, shares the comment above the run). The
    reason may be a few words or a pointer to the field's row of the
    concurrency table in src/internal.h;
  - every helper src/atomics.h defines is used somewhere in src/ (an unused
    helper is vocabulary nobody reviews).
Exit 0 when all hold, 1 with one line per violation. --self-test checks that
planted violations are found.
"""
import os
import re
import sys
import tempfile

ORDERS = ("rlx", "acq", "rel", "acq_rel", "sc")
CALL = re.compile(r"\bcircuit__(ld|st|cas|faa|ld128|cas128|ldp|stp)_([a-z_]+?)\s*\(")
# Any call of the vocabulary, fences included (for the reason rule).
SITE = re.compile(r"\bcircuit__(?:ld|st|cas|faa|ld128|cas128|ldp|stp|fence)_[a-z0-9_]*\s*\(")
HELPER = re.compile(r"static\s+inline\s+[^;{]*?\b(circuit__\w+)\s*\(")
RAW = re.compile(r"\b(__atomic_\w+|__sync_\w+|ck_pr_\w+)\s*\(|<stdatomic\.h>")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def comment_lines(text):
    """(lines a comment touches, lines a comment of its own line ends on),
    0-based. A comment after code explains that code, not the lines below."""
    touched, ends = set(), set()
    code = strip_comments(text).split("\n")
    for m in re.finditer(r"/\*.*?\*/|//[^\n]*", text, flags=re.S):
        a = text.count("\n", 0, m.start())
        b = text.count("\n", 0, m.end())
        touched.update(range(a, b + 1))
        if not code[b].strip():
            ends.add(b)
    return touched, ends


def unexplained_sites(name, raw):
    """Call sites of the vocabulary with no reason next to them."""
    touched, ends = comment_lines(raw)
    code = strip_comments(raw).split("\n")
    bad = []
    for i, line in enumerate(code):
        if not SITE.search(line) or i in touched:
            continue
        j, plain = i - 1, 0
        while j >= 0 and j not in ends:
            if not code[j].strip():
                break  # a blank line ends the search
            if not SITE.search(code[j]):
                plain += 1
                if plain > 2:
                    break
            j -= 1
        if j < 0 or j not in ends:
            bad.append("%s:%d: atomic call with no reason for its order (a comment on the "
                       "line or just above, or the table row in internal.h): %s"
                       % (name, i + 1, line.strip()))
    return bad


def unused_helpers(src_dir, files):
    """Helpers atomics.h defines that nothing in src/ calls."""
    with open(os.path.join(src_dir, "atomics.h"), encoding="utf-8") as f:
        atomics = strip_comments(f.read())
    defined = HELPER.findall(atomics)
    text = "".join(strip_comments(t) for t in files.values())
    bad = []
    for fn in defined:
        uses = len(re.findall(r"\b%s\s*\(" % fn, text)) - 1  # minus its definition
        if uses < 1:
            bad.append("atomics.h: %s is defined but never used (delete it)" % fn)
    return bad


def check(src_dir):
    bad = []
    files = {}
    for name in sorted(os.listdir(src_dir)):
        if name.endswith((".c", ".h")):
            with open(os.path.join(src_dir, name), encoding="utf-8") as f:
                files[name] = f.read()
    if "atomics.h" in files:
        bad += unused_helpers(src_dir, files)
    for name in sorted(os.listdir(src_dir)):
        if not name.endswith((".c", ".h")):
            continue
        text = strip_comments(files[name])
        if name == "atomics.h":
            body = text
            for fn in ("ld_rlx", "ld_acq", "st_rlx", "st_rel", "cas_rlx", "cas_acq_rel", "faa_rlx"):
                m = re.search(r"circuit__%s\s*\([^)]*\)\s*\{(.*?)\n\}" % fn, body, flags=re.S)
                if not m:
                    bad.append("%s: circuit__%s is not defined" % (name, fn))
                elif "__atomic_" not in m.group(1) or "#if" in m.group(1):
                    bad.append("%s: circuit__%s is not a plain __atomic builtin in every build"
                               % (name, fn))
            if "#error" not in body:
                bad.append("%s: no #error for an unknown CPU" % name)
            continue
        if name != "testing.c":  # test-only definitions: the test clock's builtins
            bad += unexplained_sites(name, files[name])
        lines = text.split("\n")
        testing = False
        for no, line in enumerate(lines, 1):
            if re.match(r"\s*#\s*(ifdef|if defined\()\s*\(?CIRCUIT_TESTING", line) or \
               re.match(r"\s*#\s*else", line) and name == "testing.c":
                testing = True
            for m in RAW.finditer(line):
                if not (name == "testing.c" and testing):
                    bad.append("%s:%d: raw atomic primitive outside src/atomics.h: %s"
                               % (name, no, m.group(0).strip()))
            for call in CALL.finditer(line):
                order = call.group(2)
                if not any(order == o or order.endswith("_" + o) for o in ORDERS):
                    bad.append("%s:%d: circuit__%s_%s names no memory order"
                               % (name, no, call.group(1), order))
    return bad


def self_test():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "atomics.h"), "w") as f:
            f.write("#error x\n" + "".join(
                "static inline int circuit__%s(int *p)\n{\n    return __atomic_load_n(p, 0);\n}\n"
                % fn for fn in ("ld_rlx", "ld_acq", "st_rlx", "st_rel", "cas_rlx",
                                "cas_acq_rel", "faa_rlx", "ld_never_used")))
        with open(os.path.join(d, "a.c"), "w") as f:
            f.write("void f(void) { x = __atomic_load_n(&y, 0); circuit__cas_weird(&z); "
                    "/* why */ circuit__ld_acq(&w); ck_pr_load_64(&v); }\n"
                    "void g(void)\n{\n    /* acquire: pairs with the release in h */\n"
                    "    a = circuit__ld_acq(&u);\n    b = circuit__ld_acq(&u2);\n"
                    "    if (x) {\n        y = 1;\n        z = 2;\n"
                    "        d = circuit__st_rlx(&u, 0);\n    }\n\n"
                    "    e = circuit__st_rel(&u, 1);\n"
                    "    q = circuit__cas_rlx(&u, &a, 1); /* relaxed: a total */\n}\n"
                    "void h(void) { circuit__faa_rlx(&t, 1); }\n")
        found = check(d)
        want = ["raw atomic primitive outside src/atomics.h: __atomic_load_n(",
                "circuit__cas_weird names no memory order",
                "raw atomic primitive outside src/atomics.h: ck_pr_load_64(",
                "circuit__ld_never_used is defined but never used",
                "a.c:10: atomic call with no reason",
                "a.c:13: atomic call with no reason"]
        missing = [w for w in want if not any(w in b for b in found)]
        extra = [b for b in found if re.search(r"a\.c:([1-9]|11|12|14|15):.*no reason|a\.c:1:.*ld_acq", b)]
        if missing or extra:
            print("self-test: missing %s, unexpected %s" % (missing, extra))
            return 1
    print("self-test: planted violations found")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else "."
    bad = check(os.path.join(root, "src"))
    for b in bad:
        print("L7: " + b)
    print("L7: atomics vocabulary: %s" % ("%d violation(s)" % len(bad) if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
