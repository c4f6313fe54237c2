#!/usr/bin/env python3
"""Checks Loom's layering against the allowed dependencies between top-level folders.

Reads, per top-level folder of the source tree:
  * every root-relative include of every C++/CUDA source (`#include "comm/communicator.h"`
    makes the file's folder depend on comm/), and the CUDA and NCCL system headers; an include
    of one of our files relative to the including file ("../worker/x.h", "x.h") is reported,
    since its folder would escape the check;
  * every target_link_libraries() of the folder's CMakeLists.txt files (a target belongs to the
    folder whose CMakeLists.txt defines it, wherever it is added from; a sub-folder belongs to
    its top-level folder: coordinator/service is coordinator);
and checks them against ALLOWED below. Each violation is printed as one line naming the file
and line, the include or link entry, and the rule it breaks; the exit status is 1 when there is
any, 0 when there is none.

Usage: check_deps.py [SOURCE_ROOT]   (default: the tree this script is in)

What it does not do: follow variables set in another file or generator expressions' conditions
(a library named anywhere in a link entry counts), or check transitive links (coordinator ->
parallel -> comm is two allowed edges).
"""

import os
import re
import sys

# The allowed dependencies between top-level folders: DESIGN.md §2 ("Layout of the repository":
# the "may depend on" column, and "the coordinator never links CUDA or NCCL"), as planned for
# issue 22. This table is the one place the build checks them: change it together with DESIGN §2
# and docs/ARCHITECTURE.md. A folder that does not exist yet is simply absent from the tree; a
# folder with sources that is in neither table is reported.
ALLOWED = {
    "core": set(),
    "comm": {"core"},
    "parallel": {"core", "comm"},
    "model": {"core", "parallel"},
    "job": {"core", "parallel", "model"},
    "checkpoint": {"core", "comm", "parallel", "model", "proto"},
    "fault": {"core", "comm"},
    "worker": {"core", "comm", "parallel", "model", "job", "checkpoint", "fault", "proto",
               "control"},
    "coordinator": {"core", "parallel", "model", "job", "fault", "proto", "control"},
    "proto": set(),
    # Added beside DESIGN's folders: the control plane's transport (length-prefixed Envelopes over
    # TCP with deadlines), shared by the coordinator and the workers; proto/ keeps the schemas.
    "control": {"core", "proto"},
}
# Folders that may depend on anything (programs and tests); nothing may depend on them.
ANYTHING = {"cli", "bench", "tests"}
# The only places that may use CUDA (its headers, .cu files, CUDA:: libraries, or Loom's CUDA
# code in core/cuda), and NCCL. comm/nccl is the GPU backend's future home (issue 26); worker/cuda
# holds the worker's device-side model (GpuGpt), built on core/cuda (the worker may depend on core).
CUDA_ALLOWED = ("core/cuda", "comm/nccl", "worker/cuda")
NCCL_ALLOWED = ("comm/nccl",)

SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h.in")
CUDA_HEADER = re.compile(r"^(cuda[A-Za-z0-9_]*\.h|cuda/|cublas|cublasLt|curand|cusparse|cusolver|"
                         r"cufft|cudnn|nvrtc|nvtx|nvToolsExt|thrust/|cub/|cooperative_groups)")
NCCL_HEADER = re.compile(r"^nccl[A-Za-z0-9_]*\.h$")
CUDA_LIBRARY = re.compile(r"^(CUDA::.*|cuda|cudart|cudart_static|cublas|cublasLt|curand|cudnn)$")
NCCL_LIBRARY = re.compile(r"^(nccl|nccl_static|NCCL::.*)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
LINK_KEYWORDS = {"PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE",
                 "LINK_INTERFACE_LIBRARIES", "debug", "optimized", "general"}


def rule_text(folder):
    """The rule of `folder`, as printed with a violation."""
    if folder in ANYTHING:
        return f"{folder} may depend on anything"
    allowed = ", ".join(sorted(ALLOWED[folder])) or "nothing of ours"
    return f"{folder} may depend on {allowed} (DESIGN §2)"


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def under(rel_path, prefixes):
    return any(rel_path == p or rel_path.startswith(p + "/") for p in prefixes)


def is_build_dir(path, name):
    return (name.startswith(".") or name in ("build", "out", "__pycache__")
            or name.startswith(("build-", "cmake-build")) or
            os.path.exists(os.path.join(path, "CMakeCache.txt")))


def walk(root):
    """Yields every file's root-relative path below the top-level folders (build trees skipped)."""
    for top in sorted(os.listdir(root)):
        top_path = os.path.join(root, top)
        if not os.path.isdir(top_path) or is_build_dir(top_path, top):
            continue
        for dirpath, dirnames, filenames in os.walk(top_path):
            dirnames[:] = sorted(d for d in dirnames
                                 if not is_build_dir(os.path.join(dirpath, d), d))
            for f in sorted(filenames):
                yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


class Checker:
    def __init__(self, root):
        self.root = root
        self.violations = []  # (file:line, what, why)
        self.folders = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
        self.ours = set(ALLOWED) | ANYTHING | self.folders
        self.checked = {"includes": 0, "links": 0}

    def add(self, where, what, why):
        self.violations.append((where, what, why))

    def depends(self, where, what, user, used):
        """`user` (a top-level folder) uses top-level folder `used`."""
        if used == user or user in ANYTHING:
            return
        if user not in ALLOWED:
            self.add(where, what, f"folder {user}/ is not in the dependency table (check_deps.py)")
        elif used not in ALLOWED[user]:
            self.add(where, what, f"{user} must not depend on {used}: {rule_text(user)}")

    def uses_gpu(self, where, what, rel_dir, kind, allowed_dirs):
        """A file or target in `rel_dir` uses `kind` (CUDA or NCCL)."""
        top = rel_dir.split("/")[0]
        if top in ANYTHING or under(rel_dir, allowed_dirs):
            return
        dirs = ", ".join(d + "/" for d in allowed_dirs)
        never = "; the coordinator never links CUDA or NCCL" if top == "coordinator" else ""
        self.add(where, what, f"{kind} is allowed only in {dirs} ({rel_dir}/ is {top}{never}; "
                 "DESIGN §2)")

    # ------------------------------------------------------------------ includes
    def check_source(self, rel):
        folder = rel.split("/")[0]
        rel_dir = os.path.dirname(rel)
        if rel.endswith((".cu", ".cuh")):
            self.uses_gpu(rel, "a CUDA source file", rel_dir, "CUDA", CUDA_ALLOWED)
        with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                self.checked["includes"] += 1
                quote, target = m.groups()
                closing = ">" if quote == "<" else '"'
                where, what = f"{rel}:{n}", f"#include {quote}{target}{closing}"
                if quote == '"' and self.relative(rel_dir, target):
                    self.add(where, what, "includes of our files are root-relative (DESIGN §2), "
                             "or this check cannot see which folder they use")
                elif quote == '"' and "/" in target and target.split("/")[0] in self.ours:
                    used = target.split("/")[0]
                    self.depends(where, what, folder, used)
                    if under(target, ("core/cuda",)):
                        self.uses_gpu(where, what, rel_dir, "CUDA", CUDA_ALLOWED)
                elif NCCL_HEADER.match(target):
                    self.uses_gpu(where, what, rel_dir, "NCCL", NCCL_ALLOWED)
                elif CUDA_HEADER.match(target):
                    self.uses_gpu(where, what, rel_dir, "CUDA", CUDA_ALLOWED)

    def relative(self, rel_dir, target):
        """Whether a quoted include names one of our files relative to the including file."""
        if ".." in target.split("/"):
            return True
        first = target.split("/")[0]
        return (first not in self.ours or "/" not in target) and os.path.isfile(
            os.path.join(self.root, rel_dir, target))

    # ------------------------------------------------------------------ CMake
    @staticmethod
    def commands(text):
        """(name, args, line) of every CMake command call in `text` (comments removed)."""
        text = re.sub(r"#\[(=*)\[.*?\]\1\]", lambda m: "\n" * m.group(0).count("\n"), text,
                      flags=re.S)
        text = re.sub(r'"(?:\\.|[^"\\])*"|#[^\n]*',  # line comments, not a '#' inside quotes
                      lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
        for m in re.finditer(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", text):
            depth, i = 1, m.end()
            while i < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            line = text.count("\n", 0, m.start()) + 1
            yield m.group(1).lower(), text[m.end():i - 1], line

    def cmake_files(self):
        return [p for p in walk(self.root) if os.path.basename(p) == "CMakeLists.txt"]

    def targets(self):
        """Every add_library/add_executable target -> the directory of its CMakeLists.txt."""
        found = {}
        for rel in self.cmake_files():
            text = read(os.path.join(self.root, rel))
            for name, args, _ in self.commands(text):
                if name in ("add_library", "add_executable") and args.split():
                    found[args.split()[0]] = os.path.dirname(rel)
        return found

    def check_cmake(self, rel, targets):
        rel_dir = os.path.dirname(rel)
        if not rel_dir:
            return  # the root CMakeLists.txt defines no target of its own
        folder = rel_dir.split("/")[0]
        text = read(os.path.join(self.root, rel))
        variables = {}
        for name, args, line in self.commands(text):
            words = args.split()
            if name == "set" and words:
                variables[words[0]] = words[1:]
                continue
            if name != "target_link_libraries" or not words:
                continue
            target = words[0]
            for word in words[1:]:
                for expanded in self.expand(word, variables):
                    for lib in re.findall(r"[A-Za-z_][A-Za-z0-9_.+-]*(?:::[A-Za-z0-9_.+-]+)*",
                                          expanded):
                        self.check_link(f"{rel}:{line}", target, lib, folder, rel_dir, targets)

    @staticmethod
    def expand(word, variables):
        m = re.fullmatch(r"\$\{([A-Za-z0-9_]+)\}", word)
        if m:
            return variables.get(m.group(1), [])
        return [re.sub(r"\$\{[^}]*\}", "", word)]  # unknown variables name nothing

    def check_link(self, where, target, lib, folder, rel_dir, targets):
        if lib in LINK_KEYWORDS:
            return
        what = f"target_link_libraries({target} ... {lib})"
        if lib in targets:
            self.checked["links"] += 1
            lib_dir = targets[lib]
            if not lib_dir:
                return  # a target of the root CMakeLists.txt: there is none
            self.depends(where, what, folder, lib_dir.split("/")[0])
            if under(lib_dir, ("core/cuda",)):
                self.uses_gpu(where, what, rel_dir, "CUDA", CUDA_ALLOWED)
        elif NCCL_LIBRARY.match(lib):
            self.checked["links"] += 1
            self.uses_gpu(where, what, rel_dir, "NCCL", NCCL_ALLOWED)
        elif CUDA_LIBRARY.match(lib):
            self.checked["links"] += 1
            self.uses_gpu(where, what, rel_dir, "CUDA", CUDA_ALLOWED)

    # ------------------------------------------------------------------ driver
    def run(self):
        files = list(walk(self.root))
        for rel in files:
            if rel.endswith(SOURCE_SUFFIXES) and "/" in rel:
                self.check_source(rel)
        targets = self.targets()
        for rel in self.cmake_files():
            self.check_cmake(rel, targets)
        return self.violations


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..")
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        print(f"check_deps.py: '{root}' is not a directory", file=sys.stderr)
        return 2
    checker = Checker(root)
    violations = checker.run()
    for where, what, why in violations:
        print(f"{where}: {what}: {why}")
    files = len({v[0].rsplit(":", 1)[0] for v in violations})
    summary = (f"{checker.checked['includes']} includes and {checker.checked['links']} links to "
               f"our or CUDA/NCCL libraries read under {root}")
    if violations:
        print(f"FAIL: {len(violations)} dependencies break DESIGN §2 in {files} files; {summary}")
        return 1
    print(f"PASS: every dependency follows DESIGN §2; {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
