// The checkpoint tests' fixture is the suite's (tests/temp_dir.h): a directory of its own per test,
// removed when the test ends. Kept under this name so the checkpoint tests need no change.
#pragma once

#include "tests/temp_dir.h"

namespace loom {

using TempDirTest = testing::TempDirTest;

}  // namespace loom
