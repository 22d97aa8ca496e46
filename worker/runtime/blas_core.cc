#include "worker/runtime/blas_core.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/matrix_product_check.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace chimera::worker {
namespace {

constexpr char kCoreTypeVariable[] = "OPENBLAS_CORETYPE";

// What OpenBLAS runs on an x86-64 model it does not know.
constexpr char kGenericCore[] = "Prescott";

std::optional<std::string> Variable(const char* name) {
  if (const char* value = std::getenv(name)) return value;
  return std::nullopt;
}

bool SameCore(const std::string& a, const std::string& b) {
  return absl::EqualsIgnoreCase(a, b);
}

std::string UnitsName(const CpuVectorUnits& cpu) {
  if (cpu.avx512) return "AVX-512";
  if (cpu.avx2) return "AVX2";
  return "AVX";
}

// A decision that keeps the process as it is.
BlasCoreDecision GoOn(std::string description, bool check_products = false) {
  BlasCoreDecision decision;
  decision.check_products = check_products;
  decision.description = std::move(description);
  return decision;
}

#if defined(__x86_64__)
// Which register states the operating system saves (XCR0).
uint64_t SavedRegisterStates() {
  uint32_t low = 0, high = 0;
  __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (uint64_t{high} << 32) | low;
}
#endif

// A core a worker chose for the CPU: checked where OpenBLAS took it.
BlasCoreDecision ChosenCore(const BlasCoreFacts& facts) {
  const std::string& loaded = *facts.loaded;
  if (!SameCore(loaded, *facts.requested)) {
    return GoOn(absl::StrCat(
        "BLAS: OpenBLAS core ", loaded, ", though ", *facts.requested,
        " was chosen for this CPU: this OpenBLAS does not take it"));
  }
  return GoOn(absl::StrCat("BLAS: OpenBLAS core ", loaded,
                           ", chosen for this CPU's ", UnitsName(facts.cpu),
                           " (OpenBLAS ran ", *facts.replaced, ")"),
              /*check_products=*/true);
}

BlasCoreDecision OperatorsCore(const BlasCoreFacts& facts) {
  const std::string& loaded = *facts.loaded;
  if (SameCore(loaded, *facts.requested)) {
    return GoOn(absl::StrCat("BLAS: OpenBLAS core ", loaded, ", set by ",
                             kCoreTypeVariable));
  }
  return GoOn(absl::StrCat("BLAS: OpenBLAS core ", loaded, ": ",
                           kCoreTypeVariable, "=", *facts.requested,
                           " is not a core this OpenBLAS takes"));
}

BlasCoreDecision OpenBlasOwnCore(const BlasCoreFacts& facts) {
  const std::string& loaded = *facts.loaded;
  const std::optional<std::string> better = CoreForCpu(facts.cpu);
  if (SameCore(loaded, kGenericCore) && better) {
    BlasCoreDecision restart =
        GoOn(absl::StrCat("BLAS: OpenBLAS runs its generic core ", loaded,
                          "; starting again with ", *better, " for this CPU's ",
                          UnitsName(facts.cpu)));
    restart.restart_with = {{kCoreTypeVariable, *better},
                            {kReplacedBlasCoreVariable, loaded}};
    return restart;
  }
  return GoOn(absl::StrCat("BLAS: OpenBLAS core ", loaded, ", its own choice"));
}

}  // namespace

CpuVectorUnits DetectCpuVectorUnits() {
  CpuVectorUnits units;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) {
    return units;
  }
  const uint64_t states = SavedRegisterStates();
  const bool ymm_saved = (states & 0x6) == 0x6;    // SSE and AVX halves.
  const bool zmm_saved = (states & 0xe6) == 0xe6;  // And the AVX-512 ones.
  const bool fma = ecx & bit_FMA;
  units.avx = ymm_saved && (ecx & bit_AVX);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return units;
  units.avx2 = units.avx && fma && (ebx & bit_AVX2);
  constexpr unsigned kAvx512 =
      bit_AVX512F | bit_AVX512CD | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
  units.avx512 = units.avx2 && zmm_saved && (ebx & kAvx512) == kAvx512;
#endif
  return units;
}

std::optional<std::string> LoadedBlasCore() {
  using CoreName = char* (*)();
  const auto get =
      reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (get == nullptr) return std::nullopt;
  return std::string(get());
}

BlasCoreFacts CurrentBlasCoreFacts() {
  return {LoadedBlasCore(), DetectCpuVectorUnits(), Variable(kCoreTypeVariable),
          Variable(kReplacedBlasCoreVariable)};
}

std::optional<std::string> CoreForCpu(const CpuVectorUnits& cpu) {
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return std::nullopt;
}

BlasCoreDecision DecideBlasCore(const BlasCoreFacts& facts) {
  if (!facts.loaded) {
    return GoOn("BLAS: not OpenBLAS; its own choice of kernels");
  }
  if (!facts.requested) return OpenBlasOwnCore(facts);
  if (!facts.replaced) return OperatorsCore(facts);
  if (SameCore(*facts.requested, *facts.replaced)) {
    return GoOn(absl::StrCat("BLAS: OpenBLAS core ", *facts.loaded,
                             ", its own choice: the core chosen for this CPU "
                             "computed wrong products"));
  }
  return ChosenCore(facts);
}

std::map<std::string, std::string> FallbackBlasEnvironment(
    const BlasCoreFacts& facts) {
  return {{kCoreTypeVariable, facts.replaced.value_or(kGenericCore)}};
}

std::string SettleBlasCore(std::map<std::string, std::string> environment,
                           char** argv) {
  const BlasCoreFacts facts = CurrentBlasCoreFacts();
  BlasCoreDecision decision = DecideBlasCore(facts);
  environment.merge(decision.restart_with);
  RestartWithEnvironment(environment, argv);
  if (decision.check_products) {
    if (const absl::Status check = CheckMatrixProducts(); !check.ok()) {
      CHIMERA_LOG(WARNING) << "BLAS: OpenBLAS core " << *facts.loaded
                           << " computes wrong products (" << check.message()
                           << "); starting again with OpenBLAS's own choice";
      RestartWithEnvironment(FallbackBlasEnvironment(facts), argv);
    }
  }
  CHIMERA_LOG(INFO) << decision.description;
  return facts.loaded.value_or("");
}

}  // namespace chimera::worker
