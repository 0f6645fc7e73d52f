#!/usr/bin/env python3
"""Regenerates the README's examples from real runs.

Every fenced block of README.md whose first line starts with "$ " is an example: its commands
("$ " lines, with continuation lines indented by four spaces) are run again, in README order, in
one scratch directory (so a later example sees the store an earlier one wrote, as a reader
following the README would), with the build directory first on PATH, and the block is rewritten
with each command followed by what it printed (stdout and stderr, as a terminal shows them).

Not run, and left as they are: abridged examples (a command or an output line that is "..."),
which are kept by hand; the benchmarks (`bash bench/...`, `build/model_accuracy`), whose
figures come from their own commands and take minutes to hours, and `salloc` examples unless
--slurm is given (they need a Slurm cluster: scripts/slurm-cluster.sh start 2).

Usage: python3 scripts/readme-examples.py [--build DIR] [--slurm] [--only TEXT] [--check]
  --only TEXT  regenerate only the examples whose first command contains TEXT
  --check      rewrite nothing; list the examples whose output changed (exit 1 if any did)
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARK = re.compile(r"^(bash bench/|build/model_accuracy)")
MARK = "@@readme-example-command@@"


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


def run_block(cmds, scratch, env):
    """Runs the commands in one shell (so `echo $?` sees the previous command); their outputs."""
    script = "__rc=0\n"
    for i, cmd in enumerate(cmds):
        script += f"echo '{MARK}{i}'; (exit $__rc); {{ {chr(10).join(cmd)}\n}} 2>&1; __rc=$?\n"
    out = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    parts = re.split(re.escape(MARK) + r"\d+\n", out)[1:]
    return [p.rstrip("\n") for p in parts]


def scratch_dir(build):
    d = tempfile.mkdtemp(prefix="tunepar-readme-")
    for name in ("configs", "bench", "tests", "scripts"):
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--slurm", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not os.access(os.path.join(build, "tunepar"), os.X_OK):
        sys.exit(f"readme-examples: no tunepar in {build} (build first, or give --build DIR)")

    readme = os.path.join(ROOT, "README.md")
    lines = open(readme).read().split("\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "TUNEPAR_"))}
    env["PATH"] = build + os.pathsep + env.get("PATH", "")
    scratch = scratch_dir(build)
    changed, out_lines, last = [], [], 0
    try:
        for start, end in examples(lines):
            block = lines[start:end]
            cmds = commands(block)
            first = cmds[0][0]
            abridged = any(line.strip() == "..." or " ... " in line for line in block)
            skip = abridged or BENCHMARK.match(first) or (first.startswith("salloc") and not args.slurm)
            if skip or args.only not in first:
                continue
            print(f"readme-examples: {first[:100]}", file=sys.stderr)
            outputs = run_block(cmds, scratch, env)
            new = []
            for cmd, output in zip(cmds, outputs):
                new += ["$ " + cmd[0]] + cmd[1:] + (output.split("\n") if output else [])
            if new != block:
                changed.append(first)
            out_lines += lines[last:start] + new
            last = end
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out_lines += lines[last:]
    if args.check:
        for c in changed:
            print(f"changed: {c}")
        return 1 if changed else 0
    open(readme, "w").write("\n".join(out_lines))
    print(f"readme-examples: {len(changed)} example(s) rewritten in README.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
