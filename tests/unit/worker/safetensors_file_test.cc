#include "worker/weights/safetensors_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/directory.h"
#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

TEST(SafetensorsFileTest, TensorsOfEveryTypeReadBackAsWritten) {
  const chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/t.safetensors";
  const NamedTensors written = {
      {"f64", at::randn({3, 2}, at::kDouble)},
      {"bf16", at::randn({5}).to(at::kBFloat16)},
      {"transposed", at::arange(6, at::kFloat).view({2, 3}).t()},
      {"i64", at::arange(4, at::kLong)},
      {"mask", at::arange(3, at::kLong).remainder(2).eq(0)},
      {"scalar", at::tensor(2.5, at::kDouble)},
      {"empty", at::zeros({0, 3})},
  };
  ASSERT_TRUE(WriteSafetensorsFile(path, written, {{"step", "3"}}).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  const absl::StatusOr<std::map<std::string, at::Tensor>> read =
      ReadSafetensorsFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), written.size());
  for (const auto& [name, tensor] : written) {
    const at::Tensor& back = read->at(name);
    EXPECT_EQ(back.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(at::equal(back, tensor)) << name;
  }
}

// A file opened beneath a root (spec.model.initFrom's) reads as by path;
// errors call it by the name given, the root-relative one users wrote.
TEST(SafetensorsFileTest, AnOpenFileReadsAsItsPathAndIsNamedAsGiven) {
  const chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/t.safetensors";
  const at::Tensor weight = at::randn({4, 3}, at::kDouble);
  ASSERT_TRUE(WriteSafetensorsFile(path, {{"w", weight}}, {}).ok());
  const absl::StatusOr<Directory> root = Directory::OpenRoot(dir.path());
  ASSERT_TRUE(root.ok()) << root.status();
  const absl::StatusOr<UniqueFd> fd = root->OpenFile("t.safetensors", O_RDONLY);
  ASSERT_TRUE(fd.ok()) << fd.status();
  const absl::StatusOr<std::map<std::string, at::Tensor>> read =
      ReadSafetensorsFile(fd->get(), "hf/t.safetensors");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(at::equal(read->at("w"), weight));

  dir.WriteFile("bad.safetensors", "not a header");
  const absl::StatusOr<UniqueFd> bad =
      root->OpenFile("bad.safetensors", O_RDONLY);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT(
      ReadSafetensorsFile(bad->get(), "hf/bad.safetensors").status().message(),
      HasSubstr("hf/bad.safetensors: not a safetensors file"));
}

TEST(SafetensorsFileTest, RefusesTypesTheFormatHasNoNameFor) {
  const chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/t.safetensors";
  EXPECT_THAT(
      WriteSafetensorsFile(path, {{"z", at::zeros({2}, at::kComplexFloat)}}, {})
          .message(),
      HasSubstr("tensor 'z' is of type ComplexFloat"));
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SafetensorsFileTest, UnreadableFilesAreNamed) {
  const chimera::testing::TempDir dir;
  const std::string path = dir.WriteFile("bad.safetensors", "not a header");
  EXPECT_THAT(ReadSafetensorsFile(path).status().message(),
              HasSubstr(path + ": not a safetensors file"));
  EXPECT_THAT(WriteSafetensorsFile(dir.path() + "/missing/t.safetensors",
                                   {{"a", at::zeros({1})}}, {})
                  .message(),
              HasSubstr("cannot create " + dir.path() + "/missing/"));
}

}  // namespace
}  // namespace chimera::worker
