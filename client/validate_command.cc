#include "client/validate_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/exit_codes.h"
#include "jobspec/job_file.h"
#include "nlohmann/json.hpp"

namespace chimera::client {
namespace {

struct ValidateOptions {
  std::vector<std::string> files;
  std::string output = "text";
  bool skip_data_check = false;
  std::string data_root;
};

struct FileResult {
  std::string file;
  FieldErrors errors;
  std::string summary;
};

void PrintText(const std::vector<FileResult>& results) {
  for (const FileResult& result : results) {
    if (result.errors.empty()) {
      std::cout << "ok: " << result.file << ": " << result.summary << "\n";
      continue;
    }
    for (const FieldError& error : result.errors.errors()) {
      std::cerr << result.file << ": " << error.ToString() << "\n";
    }
  }
}

void PrintJson(const std::vector<FileResult>& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const FileResult& result : results) {
    nlohmann::json errors = nlohmann::json::array();
    for (const FieldError& error : result.errors.errors()) {
      errors.push_back({{"field", error.path}, {"message", error.message}});
    }
    out.push_back({{"file", result.file},
                   {"valid", result.errors.empty()},
                   {"summary", result.summary},
                   {"errors", errors}});
  }
  std::cout << out.dump(2) << "\n";
}

void RunValidate(const ValidateOptions& options) {
  std::vector<FileResult> results;
  bool all_valid = true;
  for (const std::string& file : options.files) {
    chimera::v1::TrainJob job;
    FileResult result{file, {}, ""};
    result.errors = jobspec::LoadJobFile(
        file,
        {.check_data_files = !options.skip_data_check,
         .data_root = options.data_root},
        &job);
    if (result.errors.empty()) result.summary = jobspec::SummarizeJob(job);
    all_valid = all_valid && result.errors.empty();
    results.push_back(std::move(result));
  }
  if (options.output == "json") {
    PrintJson(results);
  } else {
    PrintText(results);
  }
  if (!all_valid) throw CLI::RuntimeError(kExitUsage);
}

}  // namespace

void AddValidateCommand(CLI::App& app) {
  auto options = std::make_shared<ValidateOptions>();
  CLI::App* command = app.add_subcommand(
      "validate",
      "Check job files offline: schema, values and data files. Prints 'ok' "
      "and a summary per valid file, or every problem (one per line, naming "
      "the field); exits 2 if any file is invalid.");
  command->add_option("-f,--file", options->files, "Job file(s) (YAML)")
      ->required()
      ->expected(1, -1);
  command->add_option("-o,--output", options->output, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->default_str("text");
  command->add_flag("--skip-data-check", options->skip_data_check,
                    "Do not open the data files (they live on other "
                    "machines); their paths are still checked to stay "
                    "inside the workers' data root");
  command->add_option("--data-root", options->data_root,
                      "The directory data paths are relative to, as the "
                      "workers' --data-root (default: the current directory, "
                      "as for chimera run)");
  command->callback([options] { RunValidate(*options); });
}

}  // namespace chimera::client
