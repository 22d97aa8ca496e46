// The command lines before chimera-worker had subcommands, answered with the
// subcommand that replaced each: deployments written for them fail at once,
// saying what to write, instead of doing something else.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/cli/commands.h"

namespace chimera::worker::cli {
namespace {

struct OldForm {
  const char* flag;
  const char* command;
  // Whether the flag stays, after the subcommand, with its value.
  bool flag_stays;
};

constexpr OldForm kOldForms[] = {
    {"--coordinator", "daemon", true}, {"--standalone", "standalone", false},
    {"--profile", "profile", false},   {"--devices", "devices", false},
    {"--run-task", "run-task", false},
};

bool Names(const char* argument, const char* flag) {
  const size_t length = std::strlen(flag);
  return std::strncmp(argument, flag, length) == 0 &&
         (argument[length] == '\0' || argument[length] == '=');
}

}  // namespace

std::string OldFormHint(int argc, char** argv) {
  // A subcommand comes first; a line that starts with one is not old.
  if (argc < 2 || argv[1][0] != '-') return "";
  for (int i = 1; i < argc; ++i) {
    for (const OldForm& form : kOldForms) {
      if (!Names(argv[i], form.flag)) continue;
      return absl::StrCat(
          "chimera-worker: '", form.flag, "' is the form before subcommands; "
          "write 'chimera-worker ", form.command,
          form.flag_stays ? absl::StrCat(" ", form.flag, " ...") : "",
          "' with the other flags as they were (see 'chimera-worker ",
          form.command, " --help')");
    }
  }
  return "";
}

}  // namespace chimera::worker::cli
