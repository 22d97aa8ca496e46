#include "common/root_path.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RootPathTest, RelativePathsWithoutParentsAreAccepted) {
  EXPECT_TRUE(CheckRootRelative("corpus.txt").ok());
  EXPECT_TRUE(CheckRootRelative("examples/data/corpus.txt").ok());
  EXPECT_TRUE(CheckRootRelative("./a/b..c").ok());
  EXPECT_TRUE(CheckRootRelative("").ok());
}

TEST(RootPathTest, AbsolutePathsAndParentsAreRefusedByTheirText) {
  const absl::Status absolute = CheckRootRelative("/etc/shadow");
  EXPECT_EQ(absolute.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(absolute.message(), HasSubstr("'/etc/shadow' is absolute"));
  EXPECT_THAT(CheckRootRelative("../secret").message(), HasSubstr("parent directory"));
  EXPECT_THAT(CheckRootRelative("a/../../b").message(), HasSubstr("parent directory"));
  EXPECT_THAT(CheckRootRelative("a/..").message(), HasSubstr("parent directory"));
}

// Every system call stops reading a path at its first NUL byte:
// "corpus.txt\0garbage" opened corpus.txt, a file the job does not name.
TEST(RootPathTest, APathHoldingANulByteIsRefusedNotCutShort) {
  chimera::testing::TempDir dir;
  const std::string root = *CanonicalRoot(dir.path());
  dir.WriteFile("corpus.txt", "text");
  const std::string cut("corpus.txt\0garbage", 18);
  const absl::Status text = CheckRootRelative(cut);
  EXPECT_EQ(text.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.message(),
              HasSubstr("'corpus.txt' is followed by a NUL byte"));
  EXPECT_EQ(ResolveUnderRoot(root, cut).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ResolveUnderRoot(root, std::string("runs\0", 5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RootPathTest, RootIsCanonicalAndMustBeADirectory) {
  chimera::testing::TempDir dir;
  fs::create_directories(dir.path() + "/real");
  fs::create_directory_symlink(dir.path() + "/real", dir.path() + "/link");
  const absl::StatusOr<std::string> root = CanonicalRoot(dir.path() + "/link/");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(*root, fs::canonical(dir.path() + "/real").string());
  EXPECT_THAT(CanonicalRoot(dir.path() + "/missing").status().message(),
              HasSubstr("is not an existing directory"));
  EXPECT_THAT(CanonicalRoot(dir.WriteFile("file", "x")).status().message(),
              HasSubstr("is not an existing directory"));
}

TEST(RootPathTest, PathsResolveInsideTheRootMissingPartsIncluded) {
  chimera::testing::TempDir dir;
  const std::string root = *CanonicalRoot(dir.path());
  dir.WriteFile("corpus.txt", "text");
  EXPECT_EQ(*ResolveUnderRoot(root, "corpus.txt"), root + "/corpus.txt");
  EXPECT_EQ(*ResolveUnderRoot(root, "runs/new/job"), root + "/runs/new/job");
  EXPECT_EQ(*ResolveUnderRoot(root, "."), root);
  EXPECT_EQ(*ResolveUnderRoot(root, ""), root);
  EXPECT_EQ(*ResolveUnderRoot("/", "etc"), "/etc");
}

TEST(RootPathTest, ALinkInsideTheRootIsFollowed) {
  chimera::testing::TempDir dir;
  const std::string root = *CanonicalRoot(dir.path());
  fs::create_directories(root + "/shards/1");
  fs::create_directory_symlink(root + "/shards/1", root + "/current");
  EXPECT_EQ(*ResolveUnderRoot(root, "current/x"), root + "/shards/1/x");
}

// The escape the text check cannot see: a link inside the root to a file or
// directory outside it. The message names the path asked for, not the target.
TEST(RootPathTest, ALinkOutOfTheRootIsRefusedWithoutNamingItsTarget) {
  chimera::testing::TempDir outside;
  chimera::testing::TempDir dir;
  const std::string root = *CanonicalRoot(dir.path());
  const std::string secret = outside.WriteFile("secret", "s3cret");
  fs::create_symlink(secret, root + "/innocent.txt");
  fs::create_directory_symlink(outside.path(), root + "/elsewhere");

  const absl::StatusOr<std::string> file = ResolveUnderRoot(root, "innocent.txt");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(file.status().message(), HasSubstr("'innocent.txt' leads out of the root"));
  EXPECT_THAT(file.status().message(), Not(HasSubstr(outside.path())));
  EXPECT_EQ(ResolveUnderRoot(root, "elsewhere/new-dir").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveUnderRoot(root, "/etc/passwd").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A root that is a prefix of a sibling's name ("/data" and "/data2") does
// not let a link into the sibling pass.
TEST(RootPathTest, ASiblingWhoseNameStartsLikeTheRootIsOutside) {
  chimera::testing::TempDir dir;
  fs::create_directories(dir.path() + "/data");
  fs::create_directories(dir.path() + "/data2");
  const std::string root = *CanonicalRoot(dir.path() + "/data");
  fs::create_directory_symlink(dir.path() + "/data2", root + "/sibling");
  EXPECT_EQ(ResolveUnderRoot(root, "sibling/x").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace chimera
