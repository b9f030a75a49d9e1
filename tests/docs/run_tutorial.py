#!/usr/bin/python3
"""docs::Tutorial: runs every ```sh block of docs/tutorial.md in order, in one fresh folder, with the
built dtsim first on PATH, and checks each block's exit code and the <!-- expect: TEXT --> (in its
stdout+stderr) and <!-- expect-file: PATH --> markers written after it.
Usage: run_tutorial.py TUTORIAL.md DTSIM_BINARY"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MIN_BLOCKS = 7  # the tutorial's steps; fewer means the extraction broke, not that the tutorial passed


def blocks(text):
    """(line, commands, [expected strings], [expected files]) per ```sh block."""
    out = []
    pattern = re.compile(r"^```sh\n(.*?)^```\n((?:<!-- expect(?:-file)?: .*? -->\n)*)", re.M | re.S)
    for m in pattern.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        marks = re.findall(r"<!-- (expect|expect-file): (.*?) -->", m.group(2))
        out.append((line, m.group(1), [v for k, v in marks if k == "expect"],
                    [v for k, v in marks if k == "expect-file"]))
    return out


def main():
    tutorial, binary = sys.argv[1], os.path.abspath(sys.argv[2])
    with open(tutorial) as f:
        found = blocks(f.read())
    if len(found) < MIN_BLOCKS:
        sys.exit(f"{tutorial}: found {len(found)} sh blocks, expected at least {MIN_BLOCKS}")
    work = tempfile.mkdtemp(prefix="dtsim_tutorial_")
    env = dict(os.environ, PATH=os.path.dirname(binary) + os.pathsep + os.environ.get("PATH", ""),
               MPLBACKEND="Agg")
    failures = 0
    for line, commands, expects, files in found:
        r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", commands], cwd=work, env=env,
                           capture_output=True, text=True)
        output = r.stdout + r.stderr
        problems = []
        if r.returncode != 0:
            problems.append(f"exit code {r.returncode}")
        problems += [f"'{e}' not in the output" for e in expects if e not in output]
        problems += [f"file '{p}' not written" for p in files if not os.path.isfile(os.path.join(work, p))]
        status = "ok" if not problems else "FAILED: " + "; ".join(problems)
        print(f"{tutorial}:{line}: {status}")
        if problems:
            failures += 1
            print(output)
    if failures:
        sys.exit(f"{failures} of {len(found)} tutorial blocks failed (work folder kept: {work})")
    shutil.rmtree(work)
    print(f"all {len(found)} tutorial blocks ran")


if __name__ == "__main__":
    main()
