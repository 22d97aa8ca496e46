#include "client/job_commands.h"

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/exit_codes.h"
#include "client/follow_interrupt.h"
#include "client/health_command.h"
#include "client/job_follow.h"
#include "client/job_output.h"
#include "client/job_reference.h"
#include "client/label_selector.h"
#include "client/structured_output.h"
#include "client/trace_command.h"
#include "common/number_checks.h"
#include "jobspec/job_file.h"
#include "planner/model_profile.h"

namespace chimera::client {
namespace {

struct Settings {
  ConnectionOptions connection;
  double timeout_seconds = absl::ToDoubleSeconds(kDefaultCallTimeout);
  std::string output = "text";
};

std::unique_ptr<CoordinatorClient> Connect(const Settings& settings) {
  ConnectionOptions options = settings.connection;
  options.call_timeout = absl::Seconds(settings.timeout_seconds);
  return ValueOrExit(CoordinatorClient::Connect(std::move(options)));
}

// Streams of events (submit, logs) are JSON lines for both json and yaml.
bool Json(const Settings& settings) {
  return settings.output == "json" || settings.output == "yaml";
}
bool Wide(const Settings& settings) { return settings.output == "wide"; }

// `message` as -o json or yaml ask, else `text` (text and wide).
void Print(const Settings& settings, const google::protobuf::Message& message,
           const std::string& text) {
  if (settings.output == "json") {
    std::cout << ToJson(message) << "\n";
  } else if (settings.output == "yaml") {
    std::cout << ToYaml(message);
  } else {
    std::cout << text;
  }
}

int ExitCodeOf(chimera::v1::JobState state) {
  return state == chimera::v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

void AddSubmit(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto file = std::make_shared<std::string>();
  auto no_wait = std::make_shared<bool>(false);
  auto profile_file = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "submit",
      "Submit a job and follow it until it ends (exit 0 when it succeeds, 1 when it "
      "fails or stops). --no-wait prints the job id alone and returns. The data file "
      "lives on the workers: here its path is only checked to stay inside their "
      "--data-root; they check the file itself when the job starts.");
  command->add_option("-f,--file", *file, "Job file (YAML)")->required();
  command->add_flag("--no-wait", *no_wait, "Print the job id and return");
  command->add_option("--profile", *profile_file,
                      "Plan the job from this model profile, measured on the "
                      "workers' kind of device (chimera-worker profile), "
                      "instead of the analytic model");
  command->callback([settings, file, no_wait, profile_file] {
    chimera::v1::TrainJob manifest;
    ExitOnFileErrors(*file,
                     jobspec::LoadJobFile(*file, chimera::jobspec::SpecOnly(), &manifest));
    chimera::v1::ModelProfile profile;
    if (!profile_file->empty()) {
      ExitOnFileErrors(
          *profile_file,
          planner::LoadProfileFile(
              *profile_file, manifest.spec().model().num_layers(), &profile));
    }
    auto client = Connect(*settings);
    const chimera::v1::Job job = ValueOrExit(client->Submit(manifest, profile));
    if (*no_wait) {
      Print(*settings, job, job.id() + "\n");
      return;
    }
    SayJobKeepsRunningOnInterrupt(job.id());
    if (!Json(*settings))
      std::cout << "job " << job.id() << " submitted" << std::endl;
    const int code = ExitCodeOf(
        ValueOrExit(FollowJob(*client, job.id(),
                              {.follow = true, .json = Json(*settings), .announce_plan = true})));
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

void AddLogs(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto id = std::make_shared<std::string>();
  auto follow_options = std::make_shared<FollowOptions>();
  CLI::App* command = app.add_subcommand(
      "logs", "Per-step lines of a job: step, loss, samples/s, tokens/s, bubble ratio, peak "
              "memory. -f follows until the job ends (a progress bar on a terminal).");
  command->add_option("job", *id, kJobReferenceHelp)->required();
  command->add_flag("-f,--follow", follow_options->follow, "Keep following until the job ends");
  command->add_option("--tail", follow_options->tail,
                      "Of the steps done so far, show only the last N (then follow with -f)")
      ->check(kNonNegativeNumber);
  command->callback([settings, id, follow_options] {
    auto client = Connect(*settings);
    const std::string job_id = ValueOrExit(ResolveJobId(*client, *id));
    FollowOptions options = *follow_options;
    options.json = Json(*settings);
    ValueOrExit(FollowJob(*client, job_id, options));
  });
}

void AddJobQuery(CLI::App& app, std::shared_ptr<Settings> settings, const char* name,
                 const char* help,
                 std::string (*format)(const chimera::v1::Job&)) {
  auto id = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(name, help);
  command->add_option("job", *id, kJobReferenceHelp)->required();
  command->callback([settings, id, format] {
    auto client = Connect(*settings);
    const chimera::v1::Job job =
        ValueOrExit(client->Get(ValueOrExit(ResolveJobId(*client, *id))));
    Print(*settings, job, format(job));
  });
}

void AddStop(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto id = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("stop", "Stop a pending or running job");
  command->add_option("job", *id, kJobReferenceHelp)->required();
  command->callback([settings, id] {
    auto client = Connect(*settings);
    const chimera::v1::Job job =
        ValueOrExit(client->Stop(ValueOrExit(ResolveJobId(*client, *id))));
    Print(*settings, job,
          absl::StrCat("job ", job.id(), " ", JobStateName(job.status().state()), "\n"));
  });
}

// How often `chimera list --watch` asks the coordinator again.
constexpr absl::Duration kWatchPeriod = absl::Seconds(1);

// What a watcher shows of a job: a change of it prints the list again.
std::string WatchedFields(const chimera::v1::Job& job) {
  return absl::StrCat(job.id(), " ", job.status().state(), " ", job.status().completed_steps());
}

void AddList(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto state = std::make_shared<std::string>();
  auto selector = std::make_shared<std::string>();
  auto watch = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "list", "List jobs, oldest first; --watch lists them again whenever one changes (a "
              "new job, another state, another step) until interrupted");
  command->add_option("--state", *state,
                      "Only jobs in this state: pending, running, stopped, succeeded, failed");
  command->add_option("-l,--selector", *selector,
                      "Only jobs whose labels match: KEY=VALUE, KEY!=VALUE, KEY or !KEY, "
                      "comma-separated, all must hold");
  command->add_flag("-w,--watch", *watch,
                    "After the list, list again whenever a job changes (Ctrl-C ends)");
  command->callback([settings, state, selector, watch] {
    chimera::v1::JobState filter = chimera::v1::JOB_STATE_UNSPECIFIED;
    if (!state->empty() && !ParseJobState(*state, &filter)) {
      ExitWithError(absl::InvalidArgumentError(absl::StrCat(
          "--state: '", *state, "' is not one of pending, running, stopped, succeeded, failed")));
    }
    LabelSelector labels;  // Without -l: every job.
    if (!selector->empty()) labels = ValueOrExit(LabelSelector::Parse(*selector));
    auto client = Connect(*settings);
    std::string shown;
    for (bool first = true; first || *watch; first = false) {
      if (!first) absl::SleepFor(kWatchPeriod);
      chimera::v1::ListJobsResponse response;
      std::string fields;
      for (chimera::v1::Job& job : ValueOrExit(client->List(filter))) {
        if (!labels.Matches(job.manifest().metadata().labels())) continue;
        absl::StrAppend(&fields, WatchedFields(job), "\n");
        *response.add_jobs() = std::move(job);
      }
      if (!first && fields == shown) continue;
      shown = std::move(fields);
      const std::vector<chimera::v1::Job> jobs(response.jobs().begin(), response.jobs().end());
      if (*watch && Json(*settings)) {
        std::cout << ToJsonLine(response) << "\n";  // A stream: one object a line.
      } else {
        if (!first) std::cout << "\n";
        Print(*settings, response, FormatJobTable(jobs, Wide(*settings)));
      }
      std::cout.flush();
    }
  });
}

void AddWorkers(CLI::App& app, std::shared_ptr<Settings> settings) {
  CLI::App* command =
      app.add_subcommand("workers", "List the registered workers and what they run");
  command->callback([settings] {
    const auto workers = ValueOrExit(Connect(*settings)->Workers());
    chimera::v1::ListWorkersResponse response;
    for (const auto& worker : workers) *response.add_workers() = worker;
    Print(*settings, response, FormatWorkerTable(workers, Wide(*settings)));
  });
}

// The help of the coordinator flags every job command takes, given before or
// after the command, for the foot of each command's --help.
std::string ConnectionFlagsHelp(const CLI::App& app,
                                const std::vector<const CLI::Option*>& flags) {
  std::string help = "Coordinator flags (before or after the command):\n";
  for (const CLI::Option* flag : flags) {
    absl::StrAppend(
        &help, absl::StrFormat("  %-26s  %s\n", flag->get_name(false, true),
                               flag->get_description()));
  }
  return absl::StrCat(help, "\n", app.get_footer());
}

}  // namespace

void AddJobCommands(CLI::App& app) {
  auto settings = std::make_shared<Settings>();
  app.fallthrough();
  const size_t commands_before = app.get_subcommands({}).size();
  const size_t options_before = app.get_options().size();
  app.add_option("--address", settings->connection.address,
                 absl::StrCat("Coordinator HOST:PORT (default: $CHIMERA_ADDRESS, else ",
                              kDefaultAddress, ")"));
  app.add_option("--token", settings->connection.token,
                 "Client token (default: $CHIMERA_TOKEN)");
  app.add_option("--tls-ca", settings->connection.tls.ca,
                 "PEM CA of a TLS coordinator (default: $CHIMERA_TLS_CA)");
  app.add_option("--tls-cert", settings->connection.tls.certificate,
                 "PEM client certificate, for a coordinator that requires one "
                 "(default: $CHIMERA_TLS_CERT)");
  app.add_option("--tls-key", settings->connection.tls.private_key,
                 "PEM private key of --tls-cert (default: $CHIMERA_TLS_KEY)");
  app.add_option("--timeout", settings->timeout_seconds,
                 absl::StrCat("Seconds to wait for each call (default ",
                              settings->timeout_seconds, ")"))
      ->check(kPositiveNumber)
      ->capture_default_str();
  app.add_option("-o,--output", settings->output,
                 "Output format of job commands: text, wide (more columns), json or "
                 "yaml (field names as in job files, RFC 3339 times); following "
                 "commands print one JSON object per line for json and yaml")
      ->check(CLI::IsMember({"text", "wide", "json", "yaml"}))
      ->capture_default_str();
  AddSubmit(app, settings);
  AddJobQuery(app, settings, "status", "State, progress and last step of a job",
              &FormatJobStatus);
  AddLogs(app, settings);
  AddStop(app, settings);
  AddList(app, settings);
  AddJobQuery(app, settings, "describe",
              "A job's plan, device map, per-worker memory and bubble ratio",
              &FormatJobDescription);
  AddWorkers(app, settings);
  AddTraceCommand(
      app, [settings] { return Connect(*settings); },
      [settings] { return Json(*settings); });
  AddHealthCommand(
      app, [settings] { return Connect(*settings); },
      [settings] { return absl::Seconds(settings->timeout_seconds); });

  const std::vector<CLI::Option*> options = app.get_options();
  const std::vector<const CLI::Option*> flags(options.begin() + options_before,
                                              options.end());
  const std::vector<CLI::App*> commands = app.get_subcommands({});
  for (size_t i = commands_before; i < commands.size(); ++i) {
    commands[i]->footer(ConnectionFlagsHelp(app, flags));
  }
}

}  // namespace chimera::client
