#include "client/follow_interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace chimera::client {
namespace {

// Written before the handler is installed; the handler only reads it, with
// write(2), which is safe in a signal handler where iostreams are not.
char notice[512];
size_t notice_length = 0;

void OnInterrupt(int signal) {
  [[maybe_unused]] const ssize_t written =
      ::write(STDERR_FILENO, notice, notice_length);
  ::_exit(128 + signal);
}

}  // namespace

void SayJobKeepsRunningOnInterrupt(const std::string& job_id) {
  const std::string text = absl::StrCat(
      "\nchimera: stopped following; job ", job_id,
      " keeps running (chimera logs -f ", job_id,
      " follows it again, chimera stop ", job_id, " stops it)\n");
  notice_length = std::min(text.size(), sizeof(notice));
  std::memcpy(notice, text.data(), notice_length);
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace chimera::client
