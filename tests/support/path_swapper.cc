#include "tests/support/path_swapper.h"

#include <filesystem>
#include <utility>

#include "absl/time/clock.h"

namespace chimera::testing {
namespace {

// A machine busy with other tests may run the swapper rarely: the race is
// run until it has swapped this often, however long that takes (within
// kRaceTimeout).
constexpr int kMinSwaps = 500;
constexpr absl::Duration kRaceTimeout = absl::Seconds(30);

}  // namespace

PathSwapper::PathSwapper(std::string path, std::string file,
                         std::string link_target)
    : path_(std::move(path)),
      file_(std::move(file)),
      link_target_(std::move(link_target)),
      deadline_(absl::Now() + kRaceTimeout),
      thread_([this] { Swap(); }) {}

PathSwapper::~PathSwapper() {
  stop_ = true;
  thread_.join();
}

void PathSwapper::Swap() {
  const std::string next = path_ + ".next";
  for (int i = 0; !stop_; ++i) {
    if (i % 2 == 0) {
      std::filesystem::create_symlink(link_target_, next);
    } else {
      std::filesystem::copy_file(file_, next);
    }
    std::filesystem::rename(next, path_);
    ++swaps_;
  }
}

bool PathSwapper::Raced(int opened, int refused) const {
  return (opened > 0 && refused > 0 && swaps_ >= kMinSwaps) ||
         absl::Now() >= deadline_;
}

}  // namespace chimera::testing
