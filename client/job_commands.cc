#include "client/job_commands.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/exit_codes.h"
#include "client/job_output.h"
#include "jobspec/job_file.h"

namespace chimera::client {
namespace {

struct Settings {
  ConnectionOptions connection;
  double timeout_seconds = absl::ToDoubleSeconds(kDefaultCallTimeout);
  std::string output = "text";
};

// Bad input (a spec, a flag) exits 2; a call that failed otherwise exits 1.
[[noreturn]] void Fail(const absl::Status& status) {
  std::cerr << "chimera: " << DescribeError(status) << "\n";
  throw CLI::RuntimeError(status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                              : kExitFailure);
}

template <typename T>
T OrFail(absl::StatusOr<T> value) {
  if (!value.ok()) Fail(value.status());
  return *std::move(value);
}

std::unique_ptr<CoordinatorClient> Connect(const Settings& settings) {
  ConnectionOptions options = settings.connection;
  options.call_timeout = absl::Seconds(settings.timeout_seconds);
  return OrFail(CoordinatorClient::Connect(std::move(options)));
}

bool Json(const Settings& settings) { return settings.output == "json"; }

// Prints a job's steps and state changes until it ends (follow) or until
// its current state is known; returns the last state seen.
chimera::v1::JobState Follow(CoordinatorClient& client, const Settings& settings,
                             const std::string& id, bool follow) {
  const chimera::v1::Job job = OrFail(client.Get(id));
  const int max_steps = job.manifest().spec().training().max_steps();
  const bool progress = follow && !Json(settings) && isatty(STDERR_FILENO);
  chimera::v1::JobState state = job.status().state();
  absl::Status status = client.Watch(id, follow, [&](const chimera::v1::JobEvent& event) {
    if (progress) std::cerr << "\r\033[K";
    if (Json(settings)) {
      std::string line = ToJson(event);
      line.erase(std::remove(line.begin(), line.end(), '\n'), line.end());
      std::cout << line << "\n";
    } else if (event.has_step()) {
      std::cout << FormatStep(event.step(), max_steps) << "\n";
    } else {
      std::cout << "state " << JobStateName(event.status().state())
                << (event.status().message().empty() ? "" : ": ")
                << event.status().message() << "\n";
    }
    std::cout.flush();
    if (event.has_status()) state = event.status().state();
    if (progress && event.has_step()) {
      std::cerr << ProgressBar(event.step().step() + 1, max_steps,
                               event.step().step_seconds());
    }
  });
  if (progress) std::cerr << "\r\033[K";
  if (!status.ok()) Fail(status);
  return state;
}

int ExitCodeOf(chimera::v1::JobState state) {
  return state == chimera::v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitFailure;
}

void AddSubmit(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto file = std::make_shared<std::string>();
  auto no_wait = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "submit",
      "Submit a job and follow it until it ends (exit 0 when it succeeds, 1 when it "
      "fails or stops). --no-wait prints the job id alone and returns.");
  command->add_option("-f,--file", *file, "Job file (YAML)")->required();
  command->add_flag("--no-wait", *no_wait, "Print the job id and return");
  command->callback([settings, file, no_wait] {
    chimera::v1::TrainJob manifest;
    FieldErrors errors = jobspec::LoadJobFile(*file, {.check_data_files = false}, &manifest);
    if (!errors.empty()) {
      for (const FieldError& error : errors.errors()) {
        std::cerr << *file << ": " << error.ToString() << "\n";
      }
      throw CLI::RuntimeError(kExitUsage);
    }
    auto client = Connect(*settings);
    const chimera::v1::Job job = OrFail(client->Submit(manifest));
    if (*no_wait) {
      std::cout << (Json(*settings) ? ToJson(job) : job.id()) << "\n";
      return;
    }
    if (!Json(*settings)) std::cout << "job " << job.id() << " submitted\n";
    const int code = ExitCodeOf(Follow(*client, *settings, job.id(), /*follow=*/true));
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

void AddLogs(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto id = std::make_shared<std::string>();
  auto follow = std::make_shared<bool>(false);
  CLI::App* command = app.add_subcommand(
      "logs", "Per-step lines of a job: step, loss, samples/s, tokens/s, bubble ratio, peak "
              "memory. -f follows until the job ends (a progress bar on a terminal).");
  command->add_option("job", *id, "Job id")->required();
  command->add_flag("-f,--follow", *follow, "Keep following until the job ends");
  command->callback([settings, id, follow] {
    auto client = Connect(*settings);
    Follow(*client, *settings, *id, *follow);
  });
}

void AddJobQuery(CLI::App& app, std::shared_ptr<Settings> settings, const char* name,
                 const char* help,
                 std::string (*format)(const chimera::v1::Job&)) {
  auto id = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(name, help);
  command->add_option("job", *id, "Job id")->required();
  command->callback([settings, id, format] {
    const chimera::v1::Job job = OrFail(Connect(*settings)->Get(*id));
    std::cout << (Json(*settings) ? ToJson(job) + "\n" : format(job));
  });
}

void AddStop(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto id = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("stop", "Stop a pending or running job");
  command->add_option("job", *id, "Job id")->required();
  command->callback([settings, id] {
    const chimera::v1::Job job = OrFail(Connect(*settings)->Stop(*id));
    std::cout << (Json(*settings) ? ToJson(job) + "\n"
                                  : absl::StrCat("job ", job.id(), " ",
                                                 JobStateName(job.status().state()), "\n"));
  });
}

void AddList(CLI::App& app, std::shared_ptr<Settings> settings) {
  auto state = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("list", "List jobs, oldest first");
  command->add_option("--state", *state,
                      "Only jobs in this state: pending, running, stopped, succeeded, failed");
  command->callback([settings, state] {
    chimera::v1::JobState filter = chimera::v1::JOB_STATE_UNSPECIFIED;
    if (!state->empty() && !ParseJobState(*state, &filter)) {
      Fail(absl::InvalidArgumentError(absl::StrCat(
          "--state: '", *state, "' is not one of pending, running, stopped, succeeded, failed")));
    }
    const auto jobs = OrFail(Connect(*settings)->List(filter));
    if (!Json(*settings)) {
      std::cout << FormatJobTable(jobs);
      return;
    }
    chimera::v1::ListJobsResponse response;
    for (const auto& job : jobs) *response.add_jobs() = job;
    std::cout << ToJson(response) << "\n";
  });
}

void AddWorkers(CLI::App& app, std::shared_ptr<Settings> settings) {
  CLI::App* command =
      app.add_subcommand("workers", "List the registered workers and what they run");
  command->callback([settings] {
    const auto workers = OrFail(Connect(*settings)->Workers());
    if (!Json(*settings)) {
      std::cout << FormatWorkerTable(workers);
      return;
    }
    chimera::v1::ListWorkersResponse response;
    for (const auto& worker : workers) *response.add_workers() = worker;
    std::cout << ToJson(response) << "\n";
  });
}

}  // namespace

void AddJobCommands(CLI::App& app) {
  auto settings = std::make_shared<Settings>();
  app.fallthrough();
  app.add_option("--address", settings->connection.address,
                 absl::StrCat("Coordinator HOST:PORT (default: $CHIMERA_ADDRESS, else ",
                              kDefaultAddress, ")"));
  app.add_option("--token", settings->connection.token,
                 "Client token (default: $CHIMERA_TOKEN)");
  app.add_option("--tls-ca", settings->connection.tls_ca,
                 "PEM CA of a TLS coordinator (default: $CHIMERA_TLS_CA)");
  app.add_option("--timeout", settings->timeout_seconds, "Seconds to wait for each call")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-o,--output", settings->output, "Output format of job commands")
      ->check(CLI::IsMember({"text", "json"}))
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
}

}  // namespace chimera::client
