// PathSwapper: a thread that keeps replacing `path`, by turns, with a copy
// of `file` and with a symbolic link to `link_target`, each put in place by
// an atomic rename: how an attacker races a program that checks a path and
// opens it afterwards. It stops when destroyed.
//
//   PathSwapper swapper(root + "/data.txt", root + "/inside.txt", secret);
//   while (!swapper.Raced(opened, refused)) { ... open root + "/data.txt" ... }
#ifndef CHIMERA_TESTS_SUPPORT_PATH_SWAPPER_H_
#define CHIMERA_TESTS_SUPPORT_PATH_SWAPPER_H_

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace chimera::testing {

class PathSwapper {
 public:
  // `path` should exist already (as a copy of `file`), so that opening it
  // never finds nothing.
  PathSwapper(std::string path, std::string file, std::string link_target);
  ~PathSwapper();
  PathSwapper(const PathSwapper&) = delete;
  PathSwapper& operator=(const PathSwapper&) = delete;

  // Whether the race has been run long enough to judge: the opener saw
  // both the file (`opened` times) and the link (`refused` times) while the
  // path changed at least a few hundred times, or kRaceTimeout passed.
  bool Raced(int opened, int refused) const;

 private:
  void Swap();

  const std::string path_;
  const std::string file_;
  const std::string link_target_;
  const absl::Time deadline_;
  std::atomic<int> swaps_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_PATH_SWAPPER_H_
