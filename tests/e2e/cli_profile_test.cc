// `chimera-worker profile` as a user runs it, and `chimera plan` reading the
// profile it writes.
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::JobYaml;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::chimera::testing::TinyJob;
using ::testing::HasSubstr;
using ::testing::Not;

// Small enough to profile in a second; parallelism left to the planner.
std::string ProfiledJobYaml() {
  chimera::v1::TrainJob job = TinyJob();
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden_size(32);
  spec.mutable_model()->set_seq_length(16);
  spec.mutable_training()->set_global_batch_size(8);
  spec.clear_parallelism();
  spec.mutable_resources()->set_workers(4);
  return JobYaml(job);
}

TEST(CliProfileTest, PlanAcceptsTheProfileTheWorkerWrites) {
  const chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", ProfiledJobYaml());
  const std::string profile = dir.path() + "/profile.json";
  ProcessResult r = RunProcess(
      {CHIMERA_WORKER_BINARY, "profile", "--job", job, "--out", profile});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = RunProcess({CHIMERA_BINARY, "plan", "-f", job, "--cluster",
                  "examples/clusters/local-cpu.yaml", "--profile", profile},
                 CHIMERA_SOURCE_DIR);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("samples/s"));
}

TEST(CliProfileTest, ProfileWritesJsonToStdoutByDefault) {
  const chimera::testing::TempDir dir;
  const ProcessResult r =
      RunProcess({CHIMERA_WORKER_BINARY, "profile", "--job",
                  dir.WriteFile("job.yaml", ProfiledJobYaml())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"ModelProfile\""));
  EXPECT_THAT(r.out, HasSubstr("\"source\": \"measured\""));
}

// Every layer's backward is timed whole and in its two halves, for the
// zero-bubble schedules' costs.
TEST(CliProfileTest, TimesTheBackwardsHalvesOfEveryLayer) {
  const chimera::testing::TempDir dir;
  const ProcessResult r =
      RunProcess({CHIMERA_WORKER_BINARY, "profile", "--job",
                  dir.WriteFile("job.yaml", ProfiledJobYaml())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json profile = nlohmann::json::parse(r.out);
  ASSERT_FALSE(profile.at("layers").empty());
  for (const nlohmann::json& layer : profile.at("layers")) {
    for (const nlohmann::json& timing : layer.at("timings")) {
      EXPECT_GT(timing.value("backwardInputSeconds", 0.0), 0) << layer.at("kind");
      EXPECT_GT(timing.value("backwardWeightSeconds", 0.0), 0) << layer.at("kind");
    }
  }
}

// `chimera-worker host-costs` measures what a worker pays on this host
// beyond its compute and writes the four figures that chimera run's planner
// reads; bad flags exit 2.
TEST(CliProfileTest, HostCostsWritesEveryFigure) {
  const chimera::testing::TempDir dir;
  const std::string out = dir.path() + "/host.json";
  const ProcessResult r =
      RunProcess({CHIMERA_WORKER_BINARY, "host-costs", "--runs", "5",
                  "--repeats", "1", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream file(out);
  const nlohmann::json costs = nlohmann::json::parse(file);
  for (const char* figure : {"wakeUpSeconds", "messagePostSeconds",
                             "messageReceiveSeconds", "coRunningSlowdown"}) {
    ASSERT_TRUE(costs.contains(figure)) << costs.dump();
    EXPECT_GE(costs.at(figure).get<double>(), 0) << figure;
  }
  EXPECT_EQ(costs.size(), 4u) << costs.dump();
  const ProcessResult bad =
      RunProcess({CHIMERA_WORKER_BINARY, "host-costs", "--runs", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("--runs"));
}

// The environment a running process started with, or last exec'd with.
std::vector<std::string> EnvironmentOf(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/environ");
  const std::string text((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
  return absl::StrSplit(text, '\0', absl::SkipEmpty());
}

// LibTorch's OpenMP threads and OpenBLAS's spin against each other unless
// OpenMP's idle threads sleep, which its runtime reads only when it loads:
// a worker started without it starts itself again with it, before it
// measures anything (compute_threads.h has the figures).
TEST(CliProfileTest, ProfilesWithOpenMpThreadsThatSleepWhenIdle) {
  ASSERT_EQ(::unsetenv("OMP_WAIT_POLICY"), 0);
  const chimera::testing::TempDir dir;
  ChildProcess worker({CHIMERA_WORKER_BINARY, "profile", "--job",
                       dir.WriteFile("job.yaml", ProfiledJobYaml()), "--out",
                       dir.path() + "/profile.json"});
  ASSERT_TRUE(worker.started());
  bool passive = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30);
       !passive && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(2))) {
    passive = absl::c_linear_search(EnvironmentOf(worker.pid()),
                                    "OMP_WAIT_POLICY=passive");
  }
  EXPECT_TRUE(passive) << "the profiling worker never ran with it";
  EXPECT_EQ(worker.Wait(absl::Seconds(60)), 0) << worker.err();
}

// The OpenBLAS core for this machine's CPU, from the flags Linux lists
// (read here independently of the worker's CPUID code), and the units named.
struct CoreForThisCpu {
  std::string core;  // Empty: the generic core is the match.
  std::string units;
};

CoreForThisCpu ExpectedCore() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line) && line.rfind("flags", 0) != 0) {
  }
  const std::vector<std::string> flags = absl::StrSplit(line, ' ');
  auto has = [&flags](std::initializer_list<const char*> names) {
    return absl::c_all_of(names, [&flags](const char* name) {
      return absl::c_linear_search(flags, name);
    });
  };
  if (has({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}))
    return {"SkylakeX", "AVX-512"};
  if (has({"avx2", "fma"})) return {"Haswell", "AVX2"};
  if (has({"avx"})) return {"Sandybridge", "AVX"};
  return {};
}

// Profiles the small job with the fake OpenBLAS (tests/support/
// fake_openblas.cc) preloaded and `environment` set; its stderr.
std::string ProfileWithFakeOpenBlas(ChildProcess::Environment environment) {
  ::unsetenv("OPENBLAS_CORETYPE");
  ::unsetenv("CHIMERA_OPENBLAS_REPLACED_CORE");
  environment["LD_PRELOAD"] = CHIMERA_FAKE_OPENBLAS;
  const chimera::testing::TempDir dir;
  ChildProcess worker({CHIMERA_WORKER_BINARY, "profile", "--job",
                       dir.WriteFile("job.yaml", ProfiledJobYaml()), "--out",
                       dir.path() + "/profile.json"},
                      "", "", environment);
  EXPECT_EQ(worker.Wait(absl::Seconds(60)), 0) << worker.err();
  return worker.err();
}

// Where OpenBLAS runs its generic core, a worker starts itself again on the
// core for its CPU's vector units, and says so.
TEST(CliProfileTest, RunsTheBlasCoreTheCpuCallsForWhereOpenBlasFellBack) {
  const CoreForThisCpu expected = ExpectedCore();
  const std::string log = ProfileWithFakeOpenBlas({});
  if (expected.core.empty()) {
    EXPECT_THAT(log, HasSubstr("BLAS: OpenBLAS core Prescott, its own choice"));
  } else {
    EXPECT_THAT(
        log, HasSubstr(absl::StrCat("BLAS: OpenBLAS core ", expected.core,
                                    ", chosen for this CPU's ", expected.units,
                                    " (OpenBLAS ran Prescott)")));
  }
}

// A chosen core whose products are wrong is dropped, with a warning, for
// OpenBLAS's own choice; the job still runs.
TEST(CliProfileTest, FallsBackWhereTheChosenCoreComputesWrongProducts) {
  const std::string log =
      ProfileWithFakeOpenBlas({{"FAKE_OPENBLAS_WRONG_PRODUCTS", "1"}});
  if (ExpectedCore().core.empty()) {  // Nothing chosen, nothing broken.
    EXPECT_THAT(log, HasSubstr("BLAS: OpenBLAS core Prescott, its own choice"));
    EXPECT_THAT(log, Not(HasSubstr("wrong products")));
    return;
  }
  EXPECT_THAT(log, HasSubstr("computes wrong products (Float product of"));
  EXPECT_THAT(log, HasSubstr("BLAS: OpenBLAS core Prescott, its own choice: "
                             "the core chosen for this CPU computed wrong "
                             "products"));
}

// Some machines set OPENBLAS_CORETYPE on purpose; a worker keeps it, even
// the generic core (here with the real OpenBLAS).
TEST(CliProfileTest, KeepsTheBlasCoreTheOperatorSet) {
  ::unsetenv("CHIMERA_OPENBLAS_REPLACED_CORE");
  const chimera::testing::TempDir dir;
  ChildProcess worker({CHIMERA_WORKER_BINARY, "profile", "--job",
                       dir.WriteFile("job.yaml", ProfiledJobYaml()), "--out",
                       dir.path() + "/profile.json"},
                      "", "", {{"OPENBLAS_CORETYPE", "Prescott"}});
  EXPECT_EQ(worker.Wait(absl::Seconds(60)), 0) << worker.err();
  EXPECT_THAT(
      worker.err(),
      HasSubstr("BLAS: OpenBLAS core Prescott, set by OPENBLAS_CORETYPE"));
}

TEST(CliProfileTest, ProfileWithoutAJobExitsTwo) {
  const ProcessResult r = RunProcess({CHIMERA_WORKER_BINARY, "profile"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--job is required"));
}

}  // namespace
}  // namespace chimera
