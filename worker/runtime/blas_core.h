// Which OpenBLAS kernel set (its "core") this process's matrix products run
// on, and the one its CPU calls for.
//
// OpenBLAS picks its core from the CPU model when it loads. Debian's 0.3.21
// does not know recent models (an Intel Xeon with CPUID model 207, for one)
// and runs its generic SSE3 kernels, Prescott, on them: 512x768 by 768x768
// float32 products, one thread, ran at 26 GFLOP/s there against 86-115 with
// SkylakeX, and a training step took 37 % longer. OPENBLAS_CORETYPE, which
// OpenBLAS reads once when it loads, names the core instead; so a worker that
// finds Prescott on a CPU with AVX2 or AVX-512 starts itself again with the
// matching core set, checks that core's products, and falls back to Prescott
// if they are wrong. An OPENBLAS_CORETYPE the operator set is always kept:
// some machines set one on purpose.
//
//   SettleBlasCore(OpenMpWaitEnvironment(), argv);  // before any tensor op
#ifndef CHIMERA_WORKER_RUNTIME_BLAS_CORE_H_
#define CHIMERA_WORKER_RUNTIME_BLAS_CORE_H_

#include <map>
#include <optional>
#include <string>

namespace chimera::worker {

// The vector units the CPU has and the operating system saves across context
// switches (CPUID and XGETBV), as OpenBLAS tests them.
struct CpuVectorUnits {
  bool avx = false;
  bool avx2 = false;    // With FMA.
  bool avx512 = false;  // F, CD, BW, DQ and VL: what SkylakeX's kernels use.
};
CpuVectorUnits DetectCpuVectorUnits();

// The core OpenBLAS runs (openblas_get_corename); nullopt for another BLAS.
std::optional<std::string> LoadedBlasCore();

// The variable a worker sets beside OPENBLAS_CORETYPE when it chose the core
// itself, holding the core OpenBLAS had picked: it tells a chosen core from
// an operator's, and is what a failed check falls back to.
inline constexpr char kReplacedBlasCoreVariable[] =
    "CHIMERA_OPENBLAS_REPLACED_CORE";

// What a process knows about its BLAS core when it starts.
struct BlasCoreFacts {
  std::optional<std::string> loaded;  // nullopt: not OpenBLAS.
  CpuVectorUnits cpu;
  std::optional<std::string> requested;  // OPENBLAS_CORETYPE.
  std::optional<std::string> replaced;   // kReplacedBlasCoreVariable.
};
BlasCoreFacts CurrentBlasCoreFacts();

// The OpenBLAS core for a CPU with `cpu`'s units, among those every OpenBLAS
// with run-time core selection knows by name (0.3.21 refuses "Cooperlake",
// whose float32 and float64 kernels are SkylakeX's anyway); nullopt where
// the generic core is already the match.
std::optional<std::string> CoreForCpu(const CpuVectorUnits& cpu);

struct BlasCoreDecision {
  // Variables to start the process again with; empty: go on as it is.
  std::map<std::string, std::string> restart_with;
  // The core is one a worker chose: check its products before using it.
  bool check_products = false;
  // Which core runs, and why, for the log.
  std::string description;
};
BlasCoreDecision DecideBlasCore(const BlasCoreFacts& facts);

// After a chosen core failed its check: the core OpenBLAS picked itself.
std::map<std::string, std::string> FallbackBlasEnvironment(
    const BlasCoreFacts& facts);

// Call first thing in a process that computes, before any tensor op: starts
// the process again (RestartWithEnvironment) with `environment` and the BLAS
// core DecideBlasCore asks for, checks a chosen core's products (starting
// again on the fallback core, with a warning, if they are wrong), logs which
// core runs and why, and returns its name (empty for another BLAS).
std::string SettleBlasCore(std::map<std::string, std::string> environment,
                           char** argv);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_BLAS_CORE_H_
