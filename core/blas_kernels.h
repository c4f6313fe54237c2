// OpenBLAS chooses its kernels once, when the library loads, from the CPU it identifies. On
// virtual machines that hide the CPU's model (this project's VMs report "Intel(R) Xeon(R)
// Processor"), its dynamic detection falls back to Prescott's SSE3 kernels although the CPU has
// AVX-512: GEMMs then run 4-6x slower (measured: one training step of the benchmark model 1500-1700
// ms on Prescott kernels, about 300 ms on SkylakeX's; docs/BENCHMARKS.md). The choice can only be
// changed before the library loads, through OPENBLAS_CORETYPE.
#pragma once

#include <string>

namespace loom {

// The OpenBLAS core type this CPU's instruction set supports best ("SkylakeX" with AVX-512,
// "Haswell" with AVX2 and FMA; "" otherwise).
std::string BestBlasCoreType();

// Called first in main(): when OPENBLAS_CORETYPE is unset and OpenBLAS chose a core older than
// BestBlasCoreType(), sets OPENBLAS_CORETYPE to it and re-executes this program with the same
// arguments (the process keeps its pid, so launchers and MPI do not notice). Does nothing when
// the variable is set (the user's choice, or the re-executed process) or the re-exec fails.
void UseBestBlasKernels(char** argv);

}  // namespace loom
