#!/usr/bin/python3
"""docs::Readmes: every file or folder a README names exists in the source tree.

Checks README.md, every <folder>/README.md, docs/README.md and docs/results.md. A word names a file
when it ends in one of EXTENSIONS, or when it has a '/' and its first part is a file or folder of
the source tree (or of the README's folder). It must then exist, relative to the README's folder or
to the source root; a bare file name (no '/') may be anywhere in the tree. Words with placeholders
(<name>, $VAR, '|', '...') are skipped, '*' is globbed and {a,b} expanded. Paths outside the tree
(absolute, ../shared/..., the text of a link to a web page), build and result outputs (build/,
results/, GENERATED) are skipped.
Usage: check_doc_paths.py SOURCE_DIR           check the shipped READMEs
       check_doc_paths.py --self-test          a README naming a missing file must fail"""
import fnmatch
import glob
import itertools
import os
import re
import sys
import tempfile

EXTENSIONS = (".cpp", ".hpp", ".h", ".py", ".sh", ".yaml", ".yml", ".json", ".jsonl", ".csv", ".md",
              ".png", ".svg", ".txt", ".cmake")
SKIP_PREFIXES = ("/", "../shared/", "build/", "build-", "results/", "http:", "https:", "$", "~")
# What dtsim writes when it runs, named in the READMEs but never shipped.
GENERATED = {"results.csv", "results.jsonl", "accuracy.csv", "results.jsonl.lock"}
SKIP_DIRS = {".git", "results", "__pycache__"}


def documents(root):
    found = [os.path.join(root, "README.md"), os.path.join(root, "docs", "README.md"),
             os.path.join(root, "docs", "results.md")]
    found += sorted(glob.glob(os.path.join(root, "*", "README.md")))
    return sorted({f for f in found if os.path.isfile(f)})


def tree_basenames(root):
    names = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        names.update(files)
        names.update(dirs)
    return names


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    return list(itertools.chain.from_iterable(
        expand_braces(word[:m.start()] + alt + word[m.end():]) for alt in m.group(1).split(",")))


def candidates(text):
    """(line, word) for every word of the text that names a file or folder."""
    for number, line in enumerate(text.split("\n"), 1):
        line = re.sub(r"\[([^\]]*)\]\(https?:[^)]*\)", "", line)  # names in another project, linked there
        for raw in re.split(r"[\s`()\[\]]+", line):
            word = raw.strip(",;:!?'\"")
            word = word[2:] if word.startswith("**") else word
            word = word[:-2] if word.endswith("**") else word
            word = word if word.endswith(".*") else word.rstrip(".")
            if not word or any(c in word for c in "<>|=") or "..." in word:
                continue
            if word.startswith(SKIP_PREFIXES) or word.startswith("-"):
                continue
            word = word.split("#", 1)[0]
            if word.endswith(EXTENSIONS) or "/" in word:
                yield number, word


def exists(word, folder, root, basenames):
    for path in expand_braces(word):
        if "/" not in path.rstrip("/"):
            name = path.rstrip("/")
            if name in GENERATED or name in basenames or fnmatch.filter(basenames, name):
                continue
            if os.path.exists(os.path.join(folder, name)) or os.path.exists(os.path.join(root, name)):
                continue
            return False
        hits = [os.path.join(base, path) for base in (folder, root)]
        if any(glob.glob(h) if "*" in h else os.path.exists(h) for h in hits):
            continue
        return False
    return True


def names_a_file(word, folder, root):
    """A word with a '/' and no known extension names a file only if its first part exists."""
    if word.endswith(EXTENSIONS):
        return True
    first = word.split("/", 1)[0]
    if first in ("", ".", ".."):
        return True
    return os.path.exists(os.path.join(folder, first)) or os.path.exists(os.path.join(root, first))


def check(root):
    root = os.path.abspath(root)
    basenames = tree_basenames(root)
    problems = []
    docs = documents(root)
    for doc in docs:
        folder = os.path.dirname(doc)
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for line, word in candidates(text):
            if word.split("/", 1)[0] in GENERATED:
                continue
            if names_a_file(word, folder, root) and not exists(word, folder, root, basenames):
                problems.append(f"{os.path.relpath(doc, root)}:{line}: names '{word}', which is not in the source tree")
    return docs, problems


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "sim", "src"))
        open(os.path.join(root, "sim", "src", "world.cpp"), "w").close()
        with open(os.path.join(root, "sim", "README.md"), "w") as f:
            f.write("| `src/world.cpp` | ok |\n| `src/gone.cpp` | missing |\nSee docs/nowhere.md.\n"
                    "`src/world.*`, [`x/y.py`](https://example.org/x/y.py), **`src/world.cpp`**.\n")
        with open(os.path.join(root, "README.md"), "w") as f:
            f.write("Run `scripts/run.sh`; results in results/default/results.csv; `sim/src/*.cpp`.\n")
        _, problems = check(root)
        expected = ["sim/README.md:2: names 'src/gone.cpp'", "README.md:1: names 'scripts/run.sh'",
                    "sim/README.md:3: names 'docs/nowhere.md'"]
        missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
        if missing or len(problems) != len(expected):
            sys.exit("self-test failed: expected exactly " + "; ".join(expected) + "\ngot:\n" + "\n".join(problems))
    print("self-test: a README naming a missing file fails")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    docs, problems = check(sys.argv[1])
    if len(docs) < 10:
        sys.exit(f"found {len(docs)} READMEs under {sys.argv[1]}, expected at least 10")
    for p in problems:
        print(p)
    if problems:
        sys.exit(f"{len(problems)} file names in the READMEs do not exist")
    print(f"every file named in {len(docs)} READMEs exists")


if __name__ == "__main__":
    main()
