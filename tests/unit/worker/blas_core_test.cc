#include "worker/runtime/blas_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr CpuVectorUnits kNoAvx{false, false, false};
constexpr CpuVectorUnits kAvx{true, false, false};
constexpr CpuVectorUnits kAvx2{true, true, false};
constexpr CpuVectorUnits kAvx512{true, true, true};

BlasCoreFacts Facts(std::optional<std::string> loaded, CpuVectorUnits cpu,
                    std::optional<std::string> requested = std::nullopt,
                    std::optional<std::string> replaced = std::nullopt) {
  return {std::move(loaded), cpu, std::move(requested), std::move(replaced)};
}

// The process goes on as it is; `checked`: after checking its products.
void ExpectGoesOn(const BlasCoreDecision& decision, bool checked) {
  EXPECT_THAT(decision.restart_with, IsEmpty());
  EXPECT_EQ(decision.check_products, checked);
}

// The flags Linux lists for the first CPU: the operating system's account of
// what CPUID and XGETBV say, read independently of DetectCpuVectorUnits.
std::set<std::string> CpuInfoFlags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string flag; words >> flag;) flags.insert(flag);
    return flags;
  }
  return {};
}

TEST(BlasCoreTest, DetectsTheVectorUnitsLinuxLists) {
  const std::set<std::string> flags = CpuInfoFlags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  const CpuVectorUnits units = DetectCpuVectorUnits();
  EXPECT_EQ(units.avx, flags.count("avx") == 1);
  EXPECT_EQ(units.avx2, flags.count("avx2") == 1 && flags.count("fma") == 1);
  EXPECT_EQ(units.avx512, flags.count("avx512f") && flags.count("avx512cd") &&
                              flags.count("avx512bw") &&
                              flags.count("avx512dq") &&
                              flags.count("avx512vl"));
}

TEST(BlasCoreTest, EachCpuGetsTheCoreOfItsWidestUnits) {
  EXPECT_EQ(CoreForCpu(kAvx512), "SkylakeX");
  EXPECT_EQ(CoreForCpu(kAvx2), "Haswell");
  EXPECT_EQ(CoreForCpu(kAvx), "Sandybridge");
  EXPECT_EQ(CoreForCpu(kNoAvx), std::nullopt);
}

// Debian's LibTorch runs on OpenBLAS.
TEST(BlasCoreTest, ThisProcessRunsAnOpenBlasCore) {
  const std::optional<std::string> core = LoadedBlasCore();
  ASSERT_TRUE(core.has_value()) << "this LibTorch's BLAS is not OpenBLAS";
  EXPECT_FALSE(core->empty());
}

TEST(BlasCoreTest, TheGenericCoreOnACapableCpuIsReplacedByItsMatch) {
  const BlasCoreDecision decision = DecideBlasCore(Facts("Prescott", kAvx512));
  EXPECT_EQ(decision.restart_with,
            (std::map<std::string, std::string>{
                {"OPENBLAS_CORETYPE", "SkylakeX"},
                {"CHIMERA_OPENBLAS_REPLACED_CORE", "Prescott"}}));
  EXPECT_THAT(decision.description, HasSubstr("generic core Prescott"));
}

TEST(BlasCoreTest, OpenBlasOwnSpecificCoreIsKept) {
  const BlasCoreDecision decision = DecideBlasCore(Facts("Haswell", kAvx512));
  ExpectGoesOn(decision, /*checked=*/false);
  EXPECT_EQ(decision.description,
            "BLAS: OpenBLAS core Haswell, its own choice");
}

TEST(BlasCoreTest, TheGenericCoreStaysOnACpuWithoutAvx) {
  const BlasCoreDecision decision = DecideBlasCore(Facts("Prescott", kNoAvx));
  EXPECT_THAT(decision.restart_with, IsEmpty());
  EXPECT_EQ(decision.description,
            "BLAS: OpenBLAS core Prescott, its own choice");
}

TEST(BlasCoreTest, AnotherBlasIsLeftAlone) {
  const BlasCoreDecision decision =
      DecideBlasCore(Facts(std::nullopt, kAvx512));
  ExpectGoesOn(decision, /*checked=*/false);
  EXPECT_THAT(decision.description, HasSubstr("not OpenBLAS"));
}

// Some machines set it on purpose: old OpenBLAS builds compute wrong results
// on some processors.
TEST(BlasCoreTest, TheOperatorsCoreIsKeptEvenWhereItIsTheGenericOne) {
  const BlasCoreDecision decision =
      DecideBlasCore(Facts("Prescott", kAvx512, "prescott"));
  ExpectGoesOn(decision, /*checked=*/false);
  EXPECT_EQ(decision.description,
            "BLAS: OpenBLAS core Prescott, set by OPENBLAS_CORETYPE");
}

TEST(BlasCoreTest, AnOperatorsCoreOpenBlasDoesNotTakeIsNamed) {
  const BlasCoreDecision decision =
      DecideBlasCore(Facts("Cooperlake", kAvx512, "Bogus"));
  ExpectGoesOn(decision, /*checked=*/false);
  EXPECT_EQ(decision.description,
            "BLAS: OpenBLAS core Cooperlake: OPENBLAS_CORETYPE=Bogus is not a "
            "core this OpenBLAS takes");
}

TEST(BlasCoreTest, AChosenCoreIsCheckedBeforeUse) {
  const BlasCoreDecision decision =
      DecideBlasCore(Facts("SkylakeX", kAvx512, "SkylakeX", "Prescott"));
  ExpectGoesOn(decision, /*checked=*/true);
  EXPECT_EQ(decision.description,
            "BLAS: OpenBLAS core SkylakeX, chosen for this CPU's AVX-512 "
            "(OpenBLAS ran Prescott)");
}

TEST(BlasCoreTest, AChosenCoreOpenBlasDoesNotTakeIsNeitherRetriedNorChecked) {
  const BlasCoreDecision decision =
      DecideBlasCore(Facts("Prescott", kAvx2, "Haswell", "Prescott"));
  ExpectGoesOn(decision, /*checked=*/false);
  EXPECT_THAT(decision.description,
              HasSubstr("this OpenBLAS does not take it"));
}

// A chosen core that failed its check starts the process again on the core
// OpenBLAS picked; that start must not choose again.
TEST(BlasCoreTest, AFallbackIsFinal) {
  const BlasCoreFacts chosen =
      Facts("SkylakeX", kAvx512, "SkylakeX", "Prescott");
  const std::map<std::string, std::string> fallback =
      FallbackBlasEnvironment(chosen);
  EXPECT_EQ(
      fallback,
      (std::map<std::string, std::string>{{"OPENBLAS_CORETYPE", "Prescott"}}));
  const BlasCoreDecision after = DecideBlasCore(
      Facts("Prescott", kAvx512, fallback.at("OPENBLAS_CORETYPE"), "Prescott"));
  ExpectGoesOn(after, /*checked=*/false);
  EXPECT_THAT(after.description, HasSubstr("computed wrong products"));
}

}  // namespace
}  // namespace chimera::worker
