// OpenBLAS kernel selection by instruction set.
#include "core/blas_kernels.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace loom {

std::string BestBlasCoreType() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  // (Cooperlake's kernels add only bf16 GEMMs, which Debian's OpenBLAS is built without, and
  // its name is not found by 0.3.21's OPENBLAS_CORETYPE lookup.)
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

void UseBestBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string best = BestBlasCoreType();
  if (best.empty()) return;
  const char* chosen = openblas_get_corename();
  // The cores OpenBLAS falls back to when it cannot name the CPU: older than any of `best`.
  static const char* const kFallbacks[] = {"Prescott", "Core2", "Penryn", "Dunnington",
                                           "Nehalem",  "Atom",  "Katmai", "Banias"};
  bool fallback = false;
  for (const char* f : kFallbacks) fallback = fallback || (chosen && std::strcmp(chosen, f) == 0);
  if (!fallback) return;
  // The program's own path, not /proc/self/exe: the process name (what ps and pgrep show) is
  // taken from the path executed.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return;
  self[n] = '\0';
  ::setenv("OPENBLAS_CORETYPE", best.c_str(), 1);
  ::execv(self, argv);
  // The exec failed (no /proc): run on as loaded; the variable still reaches child processes.
}

}  // namespace loom
