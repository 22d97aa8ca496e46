#include "client/plan_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_errors.h"
#include "client/planning_inputs.h"
#include "client/structured_output.h"
#include "client/text_table.h"
#include "nlohmann/json.hpp"
#include "planner/plan_search.h"

namespace chimera::client {
namespace {

struct PlanOptions {
  std::string job_file;
  std::string cluster_file;
  std::string profile_file;
  int top_k = 10;
  std::string output = "text";
};

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.2f", static_cast<double>(bytes) / (1 << 30));
}

void PrintText(const planner::SearchResult& result) {
  constexpr TextTable::Alignment kRight = TextTable::kRight;
  TextTable table({{"rank"},
                   {"scheme"},
                   {"W", kRight},
                   {"D", kRight},
                   {"B", kRight},
                   {"N", kRight},
                   {"options"},
                   {"recompute"},
                   {"iter_s", kRight},
                   {"samples/s", kRight},
                   {"bubble", kRight},
                   {"mem_max", kRight},
                   {"mem_min", kRight}});
  int rank = 1;
  for (const planner::Evaluation& evaluation : result.ranked) {
    const auto& plan = evaluation.plan;
    const auto& p = plan.prediction();
    const std::string options = planner::DescribeSchemeOptions(plan);
    table.AddRow({absl::StrCat(rank++), plan.scheme(), absl::StrCat(plan.width()),
                  absl::StrCat(plan.depth()), absl::StrCat(plan.micro_batch_size()),
                  absl::StrCat(plan.micro_batches()), options.empty() ? "-" : options,
                  plan.recompute() ? "yes" : "no",
                  absl::StrFormat("%.4g", p.iteration_seconds()),
                  absl::StrFormat("%.4g", p.samples_per_second()),
                  absl::StrFormat("%.3f", p.bubble_ratio()), Gib(p.peak_memory_bytes_max()),
                  Gib(p.peak_memory_bytes_min())});
  }
  std::cout << table.ToString() << "\nmemory in GiB per worker; " << result.evaluated
            << " candidates evaluated\n";
  if (!result.why_best.empty()) std::cout << "why: " << result.why_best << "\n";
}

// Each stage's layers, and each rank's node and device.
nlohmann::json Layout(const chimera::v1::Plan& plan) {
  nlohmann::json partition = nlohmann::json::array();
  for (const chimera::v1::StageRange& stage : plan.partition()) {
    partition.push_back({{"firstLayer", stage.first_layer()},
                         {"numLayers", stage.num_layers()}});
  }
  nlohmann::json placement = nlohmann::json::array();
  for (const chimera::v1::Placement& slot : plan.placement()) {
    placement.push_back({{"rank", slot.rank()},
                         {"node", slot.node()},
                         {"device", slot.device()}});
  }
  return {{"partition", partition}, {"placement", placement}};
}

// The ranked plans as one JSON value (-o json, -o yaml).
nlohmann::json RankedPlans(const planner::SearchResult& result) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const planner::Evaluation& evaluation : result.ranked) {
    const auto& plan = evaluation.plan;
    const auto& p = plan.prediction();
    nlohmann::json candidate = {
        {"scheme", plan.scheme()},
        {"width", plan.width()},
        {"depth", plan.depth()},
        {"microBatchSize", plan.micro_batch_size()},
        {"microBatches", plan.micro_batches()},
        {"pipelines", plan.pipelines()},
        {"concat", plan.concat()},
        {"replication", plan.replication()},
        {"sharding", plan.sharding().empty() ? "none" : plan.sharding()},
        {"recompute", plan.recompute()},
        {"predictedIterationSeconds", p.iteration_seconds()},
        {"predictedSamplesPerSecond", p.samples_per_second()},
        {"bubbleRatio", p.bubble_ratio()},
        {"peakMemoryBytesMax", p.peak_memory_bytes_max()},
        {"peakMemoryBytesMin", p.peak_memory_bytes_min()},
        {"exposedAllreduceSeconds", p.exposed_allreduce_seconds()},
        {"fits", evaluation.fits},
        {"description", planner::DescribePlan(plan)},
    };
    candidate.update(Layout(plan));
    candidates.push_back(std::move(candidate));
  }
  return {{"candidates", candidates},
          {"evaluated", result.evaluated},
          {"whyBest", result.why_best}};
}

void RunPlan(const PlanOptions& options) {
  const PlanningInputs inputs = LoadPlanningInputs(
      options.job_file, options.cluster_file, options.profile_file);
  absl::StatusOr<planner::SearchResult> result =
      planner::SearchPlans(inputs.job, inputs.cluster, inputs.profile,
                           {.top_k = options.top_k});
  if (!result.ok()) {
    ExitWithError(result.status());
  }
  if (options.output == "json") {
    std::cout << RankedPlans(*result).dump(2) << "\n";
  } else if (options.output == "yaml") {
    std::cout << JsonToYaml(RankedPlans(*result));
  } else {
    PrintText(*result);
  }
}

}  // namespace

void AddPlanCommand(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Rank candidate plans (scheme, W, D, micro-batching, recomputation, "
      "placement) for a job on a cluster, offline. Exits 1 when nothing fits.");
  command->add_option("-f,--file", options->job_file, "Job file (YAML)")->required();
  command->add_option("--cluster", options->cluster_file, "Cluster file (YAML)")
      ->required();
  command->add_option("--profile", options->profile_file,
                      "Measured model profile (YAML/JSON); default: the "
                      "analytic transformer model");
  command->add_option("--top", options->top_k, "How many plans to show")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("-o,--output", options->output, "Output format: text, json or yaml")
      ->check(CLI::IsMember({"text", "json", "yaml"}))
      ->capture_default_str();
  command->callback([options] { RunPlan(*options); });
}

}  // namespace chimera::client
