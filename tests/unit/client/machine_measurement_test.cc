#include "client/machine_measurement.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace chimera::client {
namespace {

using ::testing::HasSubstr;

// Sets an environment variable for one test and restores it after.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::optional<std::string>& value)
      : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A worker whose measuring command notes each run in `runs` and writes
// `content` to its --out, then prints `last_words` and exits with
// `exit_code`.
MeasurementRequest FakeWorker(const chimera::testing::TempDir& dir,
                              const std::string& content, int exit_code = 0,
                              const std::string& last_words = "done") {
  const std::string script = dir.WriteFile(
      "measure.sh",
      absl::StrCat("#!/bin/sh\necho run >> ", dir.path(), "/runs\n",
                   "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && out=$2; "
                   "shift; done\n",
                   "printf '%s' '", content, "' > \"$out\"\n", "echo ",
                   last_words, "\nexit ", exit_code, "\n"));
  std::filesystem::permissions(script, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  return {.worker_binary = script, .log_file = dir.path() + "/measure.log"};
}

MachineMeasurement FakeMeasurement() {
  return {.cache_folder = "tests",
          .name = "fake.json",
          .arguments = {"fake"},
          .timeout = absl::Seconds(30),
          .what = "measuring the fake",
          .alternative = " (--no-fake instead)"};
}

int Runs(const chimera::testing::TempDir& dir) {
  std::ifstream file(dir.path() + "/runs");
  int runs = 0;
  for (std::string line; std::getline(file, line);) ++runs;
  return runs;
}

// Accepts a file that holds "good".
absl::Status ReadGood(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str() == "good" ? absl::OkStatus()
                              : absl::InvalidArgumentError(path + ": not good");
}

TEST(MachineMeasurementTest, MeasuresOnceAndReusesUntilFresh) {
  const chimera::testing::TempDir dir;
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.path() + "/cache");
  MeasurementRequest request = FakeWorker(dir, "good");
  int before = 0;
  request.before_measuring = [&before] { ++before; };
  const absl::StatusOr<CachedFile> first =
      MeasureOrReuse(request, FakeMeasurement(), ReadGood);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->path, dir.path() + "/cache/chimera/tests/fake.json");
  EXPECT_FALSE(first->cached);
  const absl::StatusOr<CachedFile> second =
      MeasureOrReuse(request, FakeMeasurement(), ReadGood);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cached);
  EXPECT_EQ(Runs(dir), 1);
  EXPECT_EQ(before, 1);
  request.fresh = true;
  const absl::StatusOr<CachedFile> fresh =
      MeasureOrReuse(request, FakeMeasurement(), ReadGood);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->cached);
  EXPECT_EQ(Runs(dir), 2);
  // Nothing half-written is left beside it.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           dir.path() + "/cache/chimera/tests")) {
    EXPECT_EQ(entry.path().filename(), "fake.json");
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(MachineMeasurementTest, ADamagedCacheEntryIsMeasuredAgain) {
  const chimera::testing::TempDir dir;
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.path() + "/cache");
  std::filesystem::create_directories(dir.path() + "/cache/chimera/tests");
  std::ofstream(dir.path() + "/cache/chimera/tests/fake.json") << "go";
  const absl::StatusOr<CachedFile> kept =
      MeasureOrReuse(FakeWorker(dir, "good"), FakeMeasurement(), ReadGood);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_FALSE(kept->cached);
  EXPECT_EQ(Runs(dir), 1);
}

TEST(MachineMeasurementTest, AFailedMeasurementNamesItsLogAndLastLine) {
  const chimera::testing::TempDir dir;
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.path() + "/cache");
  const MeasurementRequest request =
      FakeWorker(dir, "good", 3, "no loopback here");
  const absl::StatusOr<CachedFile> kept =
      MeasureOrReuse(request, FakeMeasurement(), ReadGood);
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(kept.status().message(),
              HasSubstr("measuring the fake failed (exit 3): no loopback "
                        "here; its log is " +
                        request.log_file + " (--no-fake instead)"));
  EXPECT_FALSE(
      std::filesystem::exists(dir.path() + "/cache/chimera/tests/fake.json"));
}

TEST(MachineMeasurementTest, WhatItWritesMustRead) {
  const chimera::testing::TempDir dir;
  const ScopedEnvironment cache("XDG_CACHE_HOME", dir.path() + "/cache");
  const absl::StatusOr<CachedFile> kept =
      MeasureOrReuse(FakeWorker(dir, "bad"), FakeMeasurement(), ReadGood);
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kept.status().message(), HasSubstr("not good"));
}

TEST(MachineMeasurementTest, WithoutACacheTheFileLiesBesideTheLog) {
  const chimera::testing::TempDir dir;
  const ScopedEnvironment cache("XDG_CACHE_HOME", std::nullopt);
  const ScopedEnvironment home("HOME", std::nullopt);
  const absl::StatusOr<CachedFile> kept =
      MeasureOrReuse(FakeWorker(dir, "good"), FakeMeasurement(), ReadGood);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->path, dir.path() + "/fake.json");
}

TEST(MachineMeasurementTest, TheCacheIsUnderXdgCacheHomeElseHome) {
  const ScopedEnvironment cache("XDG_CACHE_HOME", "/cache");
  const ScopedEnvironment home("HOME", "/home/user");
  EXPECT_EQ(MeasurementCacheDirectory("hosts"), "/cache/chimera/hosts");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(MeasurementCacheDirectory("hosts"),
            "/home/user/.cache/chimera/hosts");
  ::unsetenv("HOME");
  EXPECT_EQ(MeasurementCacheDirectory("hosts"), std::nullopt);
}

TEST(MachineMeasurementTest, TheStableHashIsFnv1a) {
  EXPECT_EQ(StableHash(""), 14695981039346656037ull);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(StableHash("host-a"), StableHash("host-b"));
}

}  // namespace
}  // namespace chimera::client
