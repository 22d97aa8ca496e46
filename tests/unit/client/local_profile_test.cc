#include "client/local_profile.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera::client {
namespace {

using ::testing::MatchesRegex;

const ProfileBuild kBuild{"/opt/chimera/bin/chimera-worker 1000 1", "host-a",
                          /*model_files=*/""};

TEST(LocalProfileTest, TheCacheNameIsTheFamilyAndAStableHash) {
  const chimera::v1::TrainJob job = chimera::testing::TinyJob();
  const std::string name = ProfileCacheName(job, kBuild);
  EXPECT_THAT(name, MatchesRegex("gpt-[0-9a-f]{16}\\.json"));
  EXPECT_EQ(ProfileCacheName(job, kBuild), name);
}

TEST(LocalProfileTest, WhatTheTimesDependOnChangesTheName) {
  const chimera::v1::TrainJob job = chimera::testing::TinyJob();
  const std::string name = ProfileCacheName(job, kBuild);
  chimera::v1::TrainJob wider = job;
  wider.mutable_spec()->mutable_model()->set_hidden_size(
      2 * job.spec().model().hidden_size());
  chimera::v1::TrainJob bigger_batches = job;
  bigger_batches.mutable_spec()->mutable_training()->set_micro_batch_size(
      job.spec().training().micro_batch_size() + 1);
  chimera::v1::TrainJob threaded = job;
  threaded.mutable_spec()->mutable_resources()->set_threads_per_worker(2);
  chimera::v1::TrainJob adamw = job;
  adamw.mutable_spec()->mutable_training()->mutable_optimizer()->set_name(
      "adamw");
  for (const chimera::v1::TrainJob& other :
       {wider, bigger_batches, threaded, adamw}) {
    EXPECT_NE(ProfileCacheName(other, kBuild), name)
        << other.spec().DebugString();
  }
  EXPECT_NE(
      ProfileCacheName(job, {kBuild.worker_binary + "0", kBuild.host, ""}),
      name);
  EXPECT_NE(ProfileCacheName(job, {kBuild.worker_binary, "host-b", ""}), name);
}

TEST(LocalProfileTest, WhatTheTimesDoNotDependOnKeepsTheName) {
  const chimera::v1::TrainJob job = chimera::testing::TinyJob();
  chimera::v1::TrainJob other = job;
  other.mutable_metadata()->set_name("another-name");
  other.mutable_spec()->mutable_training()->set_max_steps(1000);
  other.mutable_spec()->mutable_training()->set_seed(7);
  other.mutable_spec()->mutable_parallelism()->set_schedule("gpipe");
  EXPECT_EQ(ProfileCacheName(other, kBuild), ProfileCacheName(job, kBuild));
}

TEST(LocalProfileTest, RewritingATorchScriptModelsFileChangesTheName) {
  const chimera::testing::TempDir root;
  std::filesystem::create_directory(root.path() + "/model");
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(root.path() + "/model/" + name) << bytes;
  };
  write("block-0.pt", "one block");
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_model()->set_family("torchscript");
  job.mutable_spec()->mutable_model()->set_modules("model");
  const std::string name =
      ProfileCacheName(job, CurrentBuild("/bin/true", job, root.path()));
  EXPECT_EQ(ProfileCacheName(job, CurrentBuild("/bin/true", job, root.path())),
            name);
  write("block-0.pt", "one block, retrained wider");
  EXPECT_NE(ProfileCacheName(job, CurrentBuild("/bin/true", job, root.path())),
            name);
}

}  // namespace
}  // namespace chimera::client
