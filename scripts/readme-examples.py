#!/usr/bin/env python3
"""Regenerates the examples of README.md and of docs/ from real runs.

Every fenced block of README.md and of the pages under docs/ whose first line starts with "$ " is
an example: its commands ("$ " lines, with continuation lines indented by four spaces) are run
again, in reading order, with the build directory first on PATH, and the block is rewritten with
each command followed by what it printed (stdout and stderr, as a terminal shows them). README.md
runs in one scratch directory, and the docs/ pages together in another, in the order
docs/README.md links them (an index page such as docs/benchmarks/README.md brings its own pages in
at its place; a page no index links comes last, by name): so a later example sees the store an
earlier one wrote, as a reader following the README, or the docs, would.

Not run, and left as they are: abridged examples (a command or an output line that is "..."),
which are kept by hand; the benchmarks (`bash bench/...`, `build/model_accuracy`,
`build/search_bench`, `build/shap_bench`, `build/space_bench`), whose figures come from their own
commands and take minutes to hours, and `salloc` examples unless --slurm is given (they need a
Slurm cluster: scripts/slurm-cluster.sh start 2).

--check rewrites nothing and lists the examples whose output changed, with the lines that did
(exit 1 if any did). What differs from run to run by nature is set aside there: timings ("in
0.13 s"), dates, tunepar's git revision, runs of spaces, and every number, layout key and table
rule of an example that measures on this machine (a command with --backend local or slurm,
salloc, mpirun or tunepar-core, or one on the `--store measured` where the examples keep their
measured studies), whose figures, and so the layouts the search picks, depend on its load. A
measured example whose run still took another path (another best layout, a confirmation trial)
is listed too, but fails the check only where a line it printed anew says something failed (an
error, a crash, a timeout, a file not found).

Usage: python3 scripts/readme-examples.py [--build DIR] [--slurm] [--only TEXT] [--check] [--list]
  --only TEXT  regenerate only the examples whose first command contains TEXT
  --check      rewrite nothing; list the examples whose output changed, and how (exit 1 if any did)
  --list       run nothing; list every example (file:line), and why one is not run
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = re.compile(r"^(bash bench/|build/(model_accuracy|search_bench|shap_bench|space_bench)\b)")
MEASURED = re.compile(r"--backend[ =](local|slurm)|\bsalloc\b|\bmpirun\b|tunepar-core|--store[ =]measured\b")
# In a measured example, a line with these is a failure, not chance.
FAILED = re.compile(r"\berror\b|\b(crash|timeout|invalid|interrupted)\b|not found|No such file", re.I)
MARK = "@@readme-example-command@@"
LINK = re.compile(r"\]\(([^)#\s]+\.md)(#[^)]*)?\)")


def pages():
    """[(group, path)]: README.md, then the docs/ pages in reading order; a group shares a scratch."""
    docs = os.path.join(ROOT, "docs")
    order = []

    def visit(index):
        for target, _ in LINK.findall(open(index).read()):
            path = os.path.normpath(os.path.join(os.path.dirname(index), target))
            if path.startswith(docs + os.sep) and os.path.isfile(path) and path not in order:
                order.append(path)
                if os.path.basename(path) == "README.md":
                    visit(path)

    index = os.path.join(docs, "README.md")
    if os.path.isfile(index):
        order.append(index)
        visit(index)
    order += [p for p in sorted(glob.glob(os.path.join(docs, "**", "*.md"), recursive=True))
              if p not in order]
    return [("README", os.path.join(ROOT, "README.md"))] + [("docs", p) for p in order]


def examples(lines):
    """(start, end) line ranges of the example blocks, fences excluded."""
    found, i = [], 0
    while i < len(lines):
        if lines[i].rstrip() == "```" and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            end = i + 1
            while end < len(lines) and lines[end].rstrip() != "```":
                end += 1
            found.append((i + 1, end))
            i = end
        i += 1
    return found


def commands(block):
    """The commands of a block, each a list of its lines (the first without "$ ")."""
    cmds = []
    for line in block:
        if line.startswith("$ "):
            cmds.append([line[2:]])
        elif cmds and line.startswith("    ") and cmds[-1][-1].endswith("\\"):
            cmds[-1].append(line)
    return cmds


def skipped(block, cmds, slurm):
    """Why the example is not run, or None."""
    first = cmds[0][0]
    if any(line.strip() == "..." or " ... " in line for line in block):
        return "abridged (kept by hand)"
    if BENCHMARK.match(first):
        return "a benchmark (its own command)"
    if first.startswith("salloc") and not slurm:
        return "salloc (--slurm, with a cluster up)"
    return None


def comparable(line, measured):
    """The line with what differs from run to run by nature set aside (for --check)."""
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<date>", line)
    line = re.sub(r"\([0-9a-f]{7,40}(-dirty)?\)", "(<revision>)", line)
    line = re.sub(r"\bin \d[\d.,]* ?(s|ms|us)\b", "in <time>", line)
    if measured:
        line = re.sub(r"\btp\d+-pp\d+-dp\d+-[\w-]+", "<layout>", line)
        line = re.sub(r"\d[\d.,]*", "<n>", line)
        line = re.sub(r"-{4,}", "----", line)  # a table's rule, as wide as its widest figures
    return re.sub(r"[ \t]+", " ", line.rstrip())


def differences(old, new, measured):
    """The lines of a diff of two blocks where they differ after comparable() ([] if nowhere),
    and whether a new line among them says something failed."""
    a = [comparable(line, measured) for line in old]
    b = [comparable(line, measured) for line in new]
    out, failed = [], False
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += ["  - " + line for line in old[i1:i2]] + ["  + " + line for line in new[j1:j2]]
            failed = failed or any(FAILED.search(line) for line in new[j1:j2])
    return out, failed


def run_block(cmds, scratch, env):
    """Runs the commands in one shell (so `echo $?` sees the previous command); their outputs."""
    script = "__rc=0\n"
    for i, cmd in enumerate(cmds):
        script += f"echo '{MARK}{i}'; (exit $__rc); {{ {chr(10).join(cmd)}\n}} 2>&1; __rc=$?\n"
    out = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    parts = re.split(re.escape(MARK) + r"\d+\n", out)[1:]
    return [p.rstrip("\n") for p in parts]


def scratch_dir(build, slurm):
    # Slurm's nodes (scripts/slurm-cluster.sh) each have a /tmp of their own: with --slurm the
    # scratch directory, where the stores and the trials' files go, is one they all see.
    d = tempfile.mkdtemp(prefix="tunepar-readme-", dir="/var/tmp" if slurm else None)
    for name in ("configs", "bench", "tests", "scripts"):
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def regenerate(path, scratch, env, args, changed, varied):
    """The page's lines with its examples run again; appends what changed to `changed` (with
    --check, a measured example whose run took another path by chance to `varied`)."""
    lines = open(path).read().split("\n")
    out_lines, last = [], 0
    rel = os.path.relpath(path, ROOT)
    for start, end in examples(lines):
        block = lines[start:end]
        cmds = commands(block)
        first = cmds[0][0]
        why = skipped(block, cmds, args.slurm)
        if args.list:
            print(f"{rel}:{start}: {first[:90]}" + (f"  [not run: {why}]" if why else ""))
            continue
        if why or args.only not in first:
            continue
        print(f"readme-examples: {rel}: {first[:100]}", file=sys.stderr)
        outputs = run_block(cmds, scratch, env)
        new = []
        for cmd, output in zip(cmds, outputs):
            new += ["$ " + cmd[0]] + cmd[1:] + (output.split("\n") if output else [])
        measured = any(MEASURED.search("\n".join(cmd)) for cmd in cmds)
        diff, failed = differences(block, new, measured) if args.check else ([], False)
        if diff:
            (varied if measured and not failed else changed).append(
                "\n".join([f"{rel}:{start}: {first}"] + diff))
        if not args.check and new != block:
            changed.append(f"{rel}:{start}: {first}")
        out_lines += lines[last:start] + new
        last = end
    return out_lines + lines[last:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--slurm", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not args.list and not os.access(os.path.join(build, "tunepar"), os.X_OK):
        sys.exit(f"readme-examples: no tunepar in {build} (build first, or give --build DIR)")

    # No allocation's or tunepar's settings leak into the examples; with --slurm the cluster's
    # configuration file (SLURM_CONF, as scripts/slurm-cluster.sh and minislurm export it) stays,
    # or salloc finds no controller.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM", "TUNEPAR_")) or (args.slurm and k == "SLURM_CONF")}
    env["PATH"] = build + os.pathsep + env.get("PATH", "")
    changed, varied, rewritten, scratches = [], [], [], {}
    try:
        for group, path in pages():
            if group not in scratches and not args.list:
                scratches[group] = scratch_dir(build, args.slurm)
            before = len(changed)
            new = regenerate(path, scratches.get(group), env, args, changed, varied)
            if len(changed) > before and not args.check:
                open(path, "w").write("\n".join(new))
                rewritten.append(os.path.relpath(path, ROOT))
    finally:
        for d in scratches.values():
            shutil.rmtree(d, ignore_errors=True)
    if args.list:
        return 0
    if args.check:
        for v in varied:
            print(f"measured, took another path this time (not a failure): {v}")
        for c in changed:
            print(f"changed: {c}")
        return 1 if changed else 0
    print(f"readme-examples: {len(changed)} example(s) rewritten in "
          f"{', '.join(rewritten) or 'no file'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
