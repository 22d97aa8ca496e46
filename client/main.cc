// chimera: the command-line client. Offline commands (validate, schedule)
// run here; the others talk to a coordinator.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "client/exit_codes.h"
#include "client/export_command.h"
#include "client/help_commands.h"
#include "client/job_commands.h"
#include "client/plan_command.h"
#include "client/run_command.h"
#include "client/schedule_command.h"
#include "client/tokenize_command.h"
#include "client/validate_command.h"
#include "client/version_command.h"
#include "common/logging.h"
#include "common/spelling.h"

namespace {

// An unknown first word: says which command it resembles, if any.
int UnknownCommand(const CLI::App& app, const std::string& word) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands({})) {
    commands.push_back(command->get_name());
  }
  std::cerr << "chimera: unknown command '" << word << "'";
  if (const auto meant = chimera::ClosestSpelling(word, commands)) {
    std::cerr << "; did you mean '" << *meant << "'?";
  }
  std::cerr << "\nRun 'chimera --help' for the commands.\n";
  return chimera::client::kExitUsage;
}

// The command the user ran: the deepest subcommand parsed.
const CLI::App& CommandRun(const CLI::App& app) {
  const CLI::App* command = &app;
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
  }
  return *command;
}

// An unknown flag: says which flag of the command (or a global one) it
// resembles, if any.
int UnknownFlag(const CLI::App& app, const std::string& word) {
  const CLI::App* command = &CommandRun(app);
  std::vector<std::string> flags;
  for (const CLI::App* scope : {command, &app}) {
    for (const CLI::Option* option : scope->get_options()) {
      for (const std::string& name : option->get_lnames()) {
        flags.push_back("--" + name);
      }
    }
  }
  const std::string flag = word.substr(0, word.find('='));
  const std::string where =
      command == &app ? "chimera" : "chimera " + command->get_name();
  std::cerr << "chimera: unknown flag '" << flag << "' for '" << where << "'";
  if (const auto meant = chimera::ClosestSpelling(flag, flags)) {
    std::cerr << "; did you mean '" << *meant << "'?";
  }
  std::cerr << "\nRun '" << where << " --help' for its flags.\n";
  return chimera::client::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using chimera::client::kExitOk;
  using chimera::client::kExitUsage;

  CLI::App app{
      "chimera: pipeline-parallel training of transformers with synchronous "
      "schedules (Chimera, 1F1B, GPipe, GEMS, MixPipe, looping pipelines)."};
  app.footer(
      "Exit codes: 0 success, 1 the operation failed, 2 bad input (flags, job "
      "file, parameters).\nRun 'chimera COMMAND --help' for a command's "
      "options.");
  app.require_subcommand(0, 1);
  std::string log_level = "warning";
  app.add_option("--log-level", log_level,
                 "Log level: debug, info, warning or error")
      ->default_str("warning")
      ->check([](const std::string& value) {
        auto level = chimera::ParseLogLevel(value);
        return level.ok() ? std::string() : std::string(level.status().message());
      });
  app.parse_complete_callback([&log_level] {
    chimera::SetMinLogLevel(*chimera::ParseLogLevel(log_level));
  });

  chimera::client::AddVersionCommand(app);
  chimera::client::AddValidateCommand(app);
  chimera::client::AddScheduleCommand(app);
  chimera::client::AddPlanCommand(app);
  chimera::client::AddJobCommands(app);
  chimera::client::AddRunCommand(app);
  chimera::client::AddTokenizeCommand(app);
  chimera::client::AddExportCommand(app);
  chimera::client::AddHelpCommands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ExtrasError& e) {
    if (app.get_subcommands().empty() && !app.remaining().empty() &&
        app.remaining().front().rfind('-', 0) != 0) {
      return UnknownCommand(app, app.remaining().front());
    }
    // A command keeps its own extras; those of commands that let global
    // flags through go up to the app.
    std::vector<std::string> extras = CommandRun(app).remaining();
    for (const std::string& extra : app.remaining()) extras.push_back(extra);
    for (const std::string& extra : extras) {
      if (extra.rfind("--", 0) == 0 && extra.size() > 2) {
        return UnknownFlag(app, extra);
      }
    }
    app.exit(e);
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return kExitUsage;
  }
  return kExitOk;
}
