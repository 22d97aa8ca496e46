// A scratch directory for one test, removed with everything in it when the
// TempDir goes out of scope.
#ifndef CHIMERA_TESTS_SUPPORT_TEMP_DIR_H_
#define CHIMERA_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace chimera::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `content` to `name` inside the directory; returns the full path.
  std::string WriteFile(absl::string_view name, absl::string_view content) const;

 private:
  std::string path_;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_TEMP_DIR_H_
