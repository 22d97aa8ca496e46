// Directory resolves every path beneath the directory it holds, with the
// kernel's openat2 and, as on kernels without it, component by component:
// links inside are followed (openat2) or refused (the walk), links out are
// refused, also while another thread swaps a path between a file and a link
// out; writes are whole or absent; removal never follows a link.
#include "common/directory.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/support/path_swapper.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string ReadAll(const UniqueFd& fd) {
  std::string bytes;
  char buffer[256];
  ssize_t n;
  while ((n = read(fd.get(), buffer, sizeof(buffer))) > 0) bytes.append(buffer, n);
  return bytes;
}

// Each test runs with the kernel's openat2 and with the component walk.
class DirectoryTest : public ::testing::TestWithParam<bool> {
 protected:
  DirectoryTest() {
    UseComponentWalkForTesting(GetParam());
    fs::create_directory(root_path_);
    outside_.WriteFile("secret.txt", "secret");
  }
  ~DirectoryTest() override { UseComponentWalkForTesting(false); }

  Directory Root() { return Directory::OpenRoot(root_path_).value(); }
  bool walks() const { return GetParam(); }

  chimera::testing::TempDir dir_;
  chimera::testing::TempDir outside_;
  const std::string root_path_ = dir_.path() + "/root";
};

INSTANTIATE_TEST_SUITE_P(Resolution, DirectoryTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "ComponentWalk" : "Openat2";
                         });

TEST_P(DirectoryTest, CreatesMissingDirectoriesAndNamesThemRelativeToTheRoot) {
  absl::StatusOr<Directory> job = Root().Open("ckpt/./job-1", true);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->path(), "ckpt/job-1");
  EXPECT_EQ(job->Describe("attempt"), "'ckpt/job-1/attempt'");
  EXPECT_TRUE(fs::is_directory(root_path_ + "/ckpt/job-1"));

  const absl::StatusOr<Directory> missing = Root().Open("nothing/here", false);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'nothing'"));
  EXPECT_THAT(missing.status().message(), Not(HasSubstr(root_path_)));
}

TEST_P(DirectoryTest, ParentsAndAbsolutePathsAreRefusedByTheirText) {
  EXPECT_EQ(Root().Open("../x", true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Root().OpenFile("/etc/passwd", O_RDONLY).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(DirectoryTest, ALinkOutOfTheRootIsRefusedWithoutNamingItsTarget) {
  fs::create_symlink(outside_.path() + "/secret.txt", root_path_ + "/data.txt");
  fs::create_directory_symlink(outside_.path(), root_path_ + "/elsewhere");
  const absl::StatusOr<UniqueFd> file = Root().OpenFile("data.txt", O_RDONLY);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(file.status().message(), Not(HasSubstr(outside_.path())));
  EXPECT_EQ(Root().Open("elsewhere/job", true).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(outside_.path() + "/job"));
}

TEST_P(DirectoryTest, ALinkInsideTheRootIsFollowedOnlyWhereTheKernelChecks) {
  fs::create_directories(root_path_ + "/shards/1");
  std::ofstream(root_path_ + "/shards/1/part.txt") << "part";
  fs::create_directory_symlink("shards/1", root_path_ + "/current");
  const absl::StatusOr<UniqueFd> file =
      Root().OpenFile("current/part.txt", O_RDONLY);
  if (walks()) {
    EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(file.status().message(), HasSubstr("openat2"));
  } else {
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(ReadAll(*file), "part");
  }
}

TEST_P(DirectoryTest, APathSwappedForALinkOutIsNeverOpenedOutside) {
  // The swapper flips data.txt between a file inside and a link out, each
  // put in place by an atomic rename; the opener must never read the
  // outside file, which a check followed by an open by name would.
  std::ofstream(root_path_ + "/inside.txt") << "inside";
  std::ofstream(root_path_ + "/data.txt") << "inside";
  const chimera::testing::PathSwapper swapper(root_path_ + "/data.txt",
                                              root_path_ + "/inside.txt",
                                              outside_.path() + "/secret.txt");
  const Directory root = Root();
  int opened = 0;
  int refused = 0;
  while (!swapper.Raced(opened, refused)) {
    absl::StatusOr<UniqueFd> file = root.OpenFile("data.txt", O_RDONLY);
    if (!file.ok()) {
      ASSERT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied)
          << file.status();
      ++refused;
      continue;
    }
    ++opened;
    ASSERT_EQ(ReadAll(*file), "inside");
  }
  EXPECT_GT(opened, 0);
  EXPECT_GT(refused, 0);
}

TEST_P(DirectoryTest, AnOpenDirectoryStaysTheOneOpenedWhenItsPathIsSwapped) {
  absl::StatusOr<Directory> job = Root().Open("ckpt/job", true);
  ASSERT_TRUE(job.ok()) << job.status();
  fs::rename(root_path_ + "/ckpt/job", root_path_ + "/ckpt/moved");
  fs::create_directory_symlink(outside_.path(), root_path_ + "/ckpt/job");
  ASSERT_TRUE(job->WriteFileDurably("attempt", "2").ok());
  ASSERT_TRUE(job->Remove("attempt").ok());
  ASSERT_TRUE(job->WriteFileDurably("attempt", "3").ok());
  EXPECT_EQ(Slurp(root_path_ + "/ckpt/moved/attempt"), "3");
  EXPECT_EQ(fs::directory_iterator(outside_.path())->path().filename(),
            "secret.txt");
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_.path()),
                          fs::directory_iterator()),
            1);
}

TEST_P(DirectoryTest, WritesAreWholeAndAFailedWriteLeavesNoTemporaryFile) {
  const Directory root = Root();
  ASSERT_TRUE(root.WriteFileDurably("state", "first").ok());
  EXPECT_EQ(*root.ReadFile("state", 100), "first");

  // A write that the file size limit cuts short, as a full disk would.
  struct rlimit saved;
  getrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = saved;
  limit.rlim_cur = 4;
  setrlimit(RLIMIT_FSIZE, &limit);
  const absl::Status failed = root.WriteFileDurably("state", "second");
  setrlimit(RLIMIT_FSIZE, &saved);
  EXPECT_FALSE(failed.ok());
  EXPECT_THAT(failed.message(), HasSubstr("'state.tmp-"));
  EXPECT_EQ(*root.ReadFile("state", 100), "first");
  ASSERT_TRUE(root.List().ok());
  EXPECT_EQ(root.List()->size(), 1) << "a temporary file was left behind";
}

TEST_P(DirectoryTest, ReadingRefusesLinksLargeFilesAndNonFiles) {
  const Directory root = Root();
  fs::create_symlink(outside_.path() + "/secret.txt", root_path_ + "/link");
  EXPECT_EQ(root.ReadFile("link", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(root.WriteFileDurably("big", std::string(200, 'x')).ok());
  EXPECT_THAT(root.ReadFile("big", 100).status().message(),
              HasSubstr("'big' is 200 bytes; at most 100"));
  fs::create_directory(root_path_ + "/sub");
  EXPECT_EQ(root.ReadFile("sub", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(DirectoryTest, RemovingATreeRemovesLinksNotWhatTheyPointTo) {
  fs::create_directories(root_path_ + "/step-4/deeper");
  std::ofstream(root_path_ + "/step-4/deeper/file") << "x";
  fs::create_directory_symlink(outside_.path(), root_path_ + "/step-4/out");
  fs::create_symlink(outside_.path() + "/secret.txt",
                     root_path_ + "/step-4/secret");
  const Directory root = Root();
  ASSERT_TRUE(root.Remove("step-4").ok());
  EXPECT_FALSE(fs::exists(root_path_ + "/step-4"));
  EXPECT_EQ(Slurp(outside_.path() + "/secret.txt"), "secret");
  EXPECT_TRUE(root.Remove("step-4").ok()) << "a missing entry is no error";
}

TEST_P(DirectoryTest, ListingNamesEachEntryWithItsKind) {
  fs::create_directory(root_path_ + "/step-2");
  std::ofstream(root_path_ + "/attempt") << "1";
  fs::create_symlink("attempt", root_path_ + "/link");
  absl::StatusOr<std::vector<Directory::Entry>> entries = Root().List();
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::map<std::string, Directory::Entry::Type> kinds;
  for (const auto& entry : *entries) kinds[entry.name] = entry.type;
  EXPECT_EQ(kinds.size(), 3);
  EXPECT_EQ(kinds["step-2"], Directory::Entry::Type::kDirectory);
  EXPECT_EQ(kinds["attempt"], Directory::Entry::Type::kRegularFile);
  EXPECT_EQ(kinds["link"], Directory::Entry::Type::kOther);
}

// Two checkpoint writers pruning at once list the same directory: a listing
// that showed a step twice once made a prune keep the wrong one.
TEST_P(DirectoryTest, ThreadsListingAtOnceEachSeeEveryEntryOnce) {
  constexpr int kEntries = 2000;  // names long enough for several reads
  for (int i = 0; i < kEntries; ++i) {
    fs::create_directory(root_path_ + "/step-" + std::to_string(i) +
                         "-with-a-name-long-enough-to-fill-a-read");
  }
  const Directory root = Root();
  const auto list_repeatedly = [&root](std::string& problem) {
    for (int round = 0; round < 50 && problem.empty(); ++round) {
      absl::StatusOr<std::vector<Directory::Entry>> entries = root.List();
      if (!entries.ok()) {
        problem = std::string(entries.status().message());
        break;
      }
      std::set<std::string> names;
      for (const auto& entry : *entries) names.insert(entry.name);
      if (entries->size() != kEntries || names.size() != kEntries) {
        problem = absl::StrCat("round ", round, ": ", entries->size(),
                               " entries, ", names.size(), " names");
      }
    }
  };
  std::string first, second;
  std::thread other([&] { list_repeatedly(second); });
  list_repeatedly(first);
  other.join();
  EXPECT_EQ(first, "");
  EXPECT_EQ(second, "");
}

}  // namespace
}  // namespace chimera
