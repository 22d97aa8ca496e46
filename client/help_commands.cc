#include "client/help_commands.h"

#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/exit_codes.h"
#include "common/spelling.h"

namespace chimera::client {
namespace {

// Every spelling of `command`'s flags: "-f", "--file", ...
std::string FlagsOf(const CLI::App& command) {
  std::vector<std::string> flags;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_snames()) flags.push_back("-" + name);
    for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
  }
  return absl::StrJoin(flags, " ");
}

std::vector<const CLI::App*> CommandsOf(const CLI::App& app) {
  std::vector<const CLI::App*> commands;
  for (const CLI::App* command : app.get_subcommands({})) commands.push_back(command);
  return commands;
}

// `chimera help COMMAND`: that command's help, or a did-you-mean and exit 2.
void PrintHelp(const CLI::App& app, const std::string& name) {
  if (name.empty()) {
    std::cout << app.help();
    return;
  }
  std::vector<std::string> names;
  for (const CLI::App* command : CommandsOf(app)) {
    if (command->get_name() == name) {
      std::cout << command->help();
      return;
    }
    names.push_back(command->get_name());
  }
  std::cerr << "chimera help: no command '" << name << "'";
  if (const auto meant = ClosestSpelling(name, names)) {
    std::cerr << "; did you mean '" << *meant << "'?";
  }
  std::cerr << "\n";
  throw CLI::RuntimeError(kExitUsage);
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  std::vector<std::string> names;
  std::string cases;
  for (const CLI::App* command : CommandsOf(app)) {
    names.push_back(command->get_name());
    absl::StrAppend(&cases, "    ", command->get_name(), ") flags=\"", FlagsOf(*command),
                    "\" ;;\n");
  }
  return absl::StrCat(
      "# bash completion for chimera (chimera completion bash)\n"
      "_chimera() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"\" flags=\"\" i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    case \"${COMP_WORDS[i]}\" in -*) ;; *) cmd=\"${COMP_WORDS[i]}\"; break ;; esac\n"
      "  done\n"
      "  if [[ -z \"$cmd\" && \"$cur\" != -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"",
      absl::StrJoin(names, " "),
      "\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"$cmd\" in\n",
      cases,
      "  esac\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$flags ",
      FlagsOf(app),
      "\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -o filenames -F _chimera chimera\n");
}

std::string ZshCompletion(const CLI::App& app) {
  return absl::StrCat(
      "# zsh completion for chimera (chimera completion zsh), through bashcompinit\n"
      "autoload -U +X bashcompinit && bashcompinit\n",
      BashCompletion(app));
}

void AddHelpCommands(CLI::App& app) {
  auto command_name = std::make_shared<std::string>();
  CLI::App* help = app.add_subcommand(
      "help", "The full help of a command, as 'chimera COMMAND --help' prints it");
  help->add_option("command", *command_name, "The command (default: all of them)");
  help->callback([&app, command_name] { PrintHelp(app, *command_name); });

  auto shell = std::make_shared<std::string>();
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print a shell completion script of chimera's commands and flags: "
      "source <(chimera completion bash) in ~/.bashrc, or zsh in ~/.zshrc");
  completion->add_option("shell", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  completion->callback([&app, shell] {
    std::cout << (*shell == "bash" ? BashCompletion(app) : ZshCompletion(app));
  });
}

}  // namespace chimera::client
