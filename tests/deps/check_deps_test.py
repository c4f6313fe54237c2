#!/usr/bin/env python3
"""Unit test of check_deps.py: fake source trees (in a temporary directory, removed afterwards)
with allowed and forbidden includes and links; the checker must report exactly the forbidden
ones, naming the file and line, the include or link entry and the rule, and exit 1 for them."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ left beside the script
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_deps  # noqa: E402

# A tree that follows DESIGN §2: each folder uses only what it may.
ALLOWED_TREE = {
    "core/status.h": "#pragma once\n#include <string>\n",
    "core/tensor.cc": '#include "core/status.h"\n',
    "core/cuda/kernels.cu": '#include <cuda_runtime.h>\n#include "core/cuda/device.h"\n',
    "core/cuda/device.h": '#include "core/status.h"\n',
    "core/CMakeLists.txt": "add_library(loom_core tensor.cc)\n"
                           "target_link_libraries(loom_core PUBLIC yaml-cpp)\n",
    "core/cuda/CMakeLists.txt":
        "add_library(loom_core_cuda kernels.cu)\n"
        "target_link_libraries(loom_core_cuda PUBLIC loom_core CUDA::cudart)\n",
    "comm/communicator.h": '#include "core/status.h"\n',
    "comm/CMakeLists.txt":
        "add_library(loom_comm c.cc)\n"
        "target_link_libraries(loom_comm PUBLIC loom_core PRIVATE MPI::MPI_CXX)\n",
    "parallel/zero/zero.cc": '#include "comm/communicator.h"\n#include "parallel/layout.h"\n',
    "parallel/CMakeLists.txt": "add_library(loom_parallel zero/zero.cc)\n"
                               "target_link_libraries(loom_parallel PUBLIC loom_core loom_comm)\n",
    "coordinator/service/service.cc":
        '#include "proto/control.pb.h"\n#include "parallel/layout.h"\n',
    "coordinator/service/CMakeLists.txt":
        "set(LIBS loom_parallel)\n"
        "add_library(loom_coordinator_service service.cc)\n"
        "# target_link_libraries(loom_coordinator_service loom_worker) is a comment\n"
        "target_link_libraries(loom_coordinator_service\n  PUBLIC ${LIBS} Boost::headers)\n",
    "worker/trainer.cc": '#include "checkpoint/engine.h"\n#include "comm/communicator.h"\n',
    "worker/CMakeLists.txt": "add_library(loom_worker trainer.cc)\n"
                             "target_link_libraries(loom_worker PUBLIC loom_parallel)\n",
    "cli/main.cc": '#include "worker/trainer.h"\n#include "core/cuda/device.h"\n',
    "tests/core/t.cc": '#include "worker/trainer.h"\n#include "tests/temp_dir.h"\n',
    "build/coordinator/service/generated.h": '#include "worker/trainer.h"\n',
    "build/CMakeCache.txt": "",
}

# Forbidden uses, each added to the allowed tree: (file, text, expected violation fragments).
FORBIDDEN = [
    ("parallel/zero/bad.h", '// zero\n#include "checkpoint/format.h"\n',
     ["parallel/zero/bad.h:2", '#include "checkpoint/format.h"', "parallel must not depend on",
      "parallel may depend on comm, core"]),
    ("coordinator/service/bad.cc", '#include "worker/trainer.h"\n',
     ["coordinator/service/bad.cc:1", '#include "worker/trainer.h"',
      "coordinator must not depend on worker"]),
    ("coordinator/planner/gpu.cc", "#include <cuda_runtime.h>\n",
     ["coordinator/planner/gpu.cc:1", "#include <cuda_runtime.h>", "CUDA is allowed only in",
      "the coordinator never links CUDA or NCCL"]),
    ("worker/nccl_use.cc", "#include <nccl.h>\n",
     ["worker/nccl_use.cc:1", "#include <nccl.h>", "NCCL is allowed only in comm/nccl/"]),
    ("core/up.h", '#include "tests/temp_dir.h"\n',
     ["core/up.h:1", "core must not depend on tests", "core may depend on nothing of ours"]),
    ("core/kernels/fast.cu", "\n",
     ["core/kernels/fast.cu", "a CUDA source file", "CUDA is allowed only in core/cuda/"]),
    ("comm/CMakeLists.txt", "add_library(loom_comm c.cc)\n"
     "target_link_libraries(loom_comm PUBLIC loom_core\n  PRIVATE $<$<BOOL:X>:loom_worker>)\n",
     ["comm/CMakeLists.txt:2", "target_link_libraries(loom_comm ... loom_worker)",
      "comm must not depend on worker", "comm may depend on core"]),
    ("coordinator/CMakeLists.txt", "add_library(loom_coordinator p.cc)\n"
     "target_link_libraries(loom_coordinator PUBLIC loom_core_cuda)\n",
     ["coordinator/CMakeLists.txt:2", "loom_core_cuda", "CUDA is allowed only in"]),
    ("proto/wire.h", '#include "core/status.h"\n',
     ["proto/wire.h:1", "proto must not depend on core", "proto may depend on nothing of ours"]),
    ("coordinator/service/up.cc", '#include "../../worker/trainer.h"\n',
     ["coordinator/service/up.cc:1", '#include "../../worker/trainer.h"', "root-relative"]),
    ("core/same_dir.cc", '#include "status.h"\n',
     ["core/same_dir.cc:1", '#include "status.h"', "root-relative"]),
    ("examples/plugin.cc", '#include "core/status.h"\n',
     ["examples/plugin.cc:1", "folder examples/ is not in the dependency table"]),
]


def write_tree(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def check(files):
    """(exit status, printed lines, violations) of check_deps.py on a tree of `files`."""
    with tempfile.TemporaryDirectory(prefix="loom_check_deps_") as root:
        write_tree(root, files)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = check_deps.main(["check_deps.py", root])
        violations = check_deps.Checker(root).run()
    return status, out.getvalue().splitlines(), violations


class CheckDepsTest(unittest.TestCase):
    def test_allowed_tree_passes(self):
        status, lines, violations = check(ALLOWED_TREE)
        self.assertEqual(violations, [], "\n".join(lines))
        self.assertEqual(status, 0)
        self.assertTrue(lines[-1].startswith("PASS"), lines)

    def test_each_forbidden_use_is_named(self):
        for rel, text, expected in FORBIDDEN:
            with self.subTest(file=rel):
                status, lines, violations = check({**ALLOWED_TREE, rel: text})
                self.assertEqual(status, 1, "\n".join(lines))
                self.assertEqual(len(violations), 1, "\n".join(lines))
                line = lines[0]
                for fragment in expected:
                    self.assertIn(fragment, line)
                self.assertTrue(lines[-1].startswith("FAIL: 1 dependencies"), lines)

    def test_all_forbidden_uses_together(self):
        tree = dict(ALLOWED_TREE)
        for rel, text, _ in FORBIDDEN:
            tree[rel] = text
        status, lines, violations = check(tree)
        self.assertEqual(status, 1)
        self.assertEqual(sorted(v[0].split(":")[0] for v in violations),
                         sorted(rel for rel, _, _ in FORBIDDEN), "\n".join(lines))


if __name__ == "__main__":
    unittest.main()
