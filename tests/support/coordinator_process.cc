#include "tests/support/coordinator_process.h"

#include <signal.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace chimera::testing {
namespace {

// How long a child whose stdout closed may take to exit.
constexpr absl::Duration kEndingTimeout = absl::Seconds(5);

}  // namespace

absl::StatusOr<std::string> AwaitAnnouncedAddress(net::ChildProcess& process,
                                                  absl::string_view prefix,
                                                  absl::Duration timeout) {
  absl::StatusOr<std::string> line = process.ReadLine(timeout);
  if (!line.ok()) {
    std::string ending;
    if (absl::IsOutOfRange(line.status())) {
      // Stdout closed: the child is ending, and its exit status and the rest
      // of its stderr say why.
      ending = absl::StrCat(" (exit status ", process.Wait(kEndingTimeout), ")");
    }
    return absl::Status(
        line.status().code(),
        absl::StrCat("no '", prefix, "ADDRESS' line: ", line.status().message(),
                     ending, "; stderr:\n", process.err()));
  }
  absl::string_view address = *line;
  if (!absl::ConsumePrefix(&address, prefix)) {
    return absl::InternalError(
        absl::StrCat("expected '", prefix, "ADDRESS', got '", *line, "'"));
  }
  return std::string(address);
}

absl::StatusOr<CoordinatorProcess> CoordinatorProcess::Start(
    const std::string& binary, const std::vector<std::string>& flags,
    const std::string& listen) {
  std::vector<std::string> argv = {binary, "--listen", listen};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto process = std::make_unique<net::ChildProcess>(argv);
  if (!process->started()) {
    return absl::InternalError(absl::StrCat("cannot start ", binary));
  }
  absl::StatusOr<std::string> address =
      AwaitAnnouncedAddress(*process, "listening on ");
  if (!address.ok()) return address.status();
  return CoordinatorProcess(std::move(process), *std::move(address));
}

int CoordinatorProcess::Stop(absl::Duration timeout) {
  process_->Signal(SIGTERM);
  return process_->Wait(timeout);
}

}  // namespace chimera::testing
