// The planner's whole search (every scheme, W x D = P, micro-batch sizes,
// knobs, recomputation, placement refinement) for clusters up to P = 2048
// devices, on the analytic profile of a 2.5B-parameter GPT.
#include "benchmark/benchmark.h"
#include "common/version.h"
#include "planner/analytic_profile.h"
#include "planner/plan_search.h"

namespace chimera::planner {
namespace {

constexpr int kDevicesPerNode = 8;

chimera::v1::TrainJob Gpt(int workers) {
  chimera::v1::TrainJob job;
  job.set_api_version(kApiVersion);
  job.set_kind("TrainJob");
  auto* spec = job.mutable_spec();
  auto* model = spec->mutable_model();
  model->set_family("gpt");
  model->set_num_layers(48);
  model->set_hidden_size(2048);
  model->set_num_heads(16);
  model->set_seq_length(2048);
  model->set_vocab_size(50257);
  spec->mutable_training()->set_global_batch_size(2 * workers);
  spec->mutable_training()->mutable_optimizer()->set_name("adamw");
  spec->mutable_resources()->set_workers(workers);
  return job;
}

chimera::v1::Cluster Cluster(int workers) {
  chimera::v1::Cluster cluster;
  auto* spec = cluster.mutable_spec();
  spec->set_nodes(workers / kDevicesPerNode);
  spec->set_devices_per_node(kDevicesPerNode);
  spec->mutable_device()->set_memory_bytes(int64_t{80} << 30);
  spec->mutable_device()->set_peak_flops(3.12e14);
  spec->mutable_links()->mutable_intra_node()->set_latency_seconds(5e-6);
  spec->mutable_links()->mutable_intra_node()->set_bandwidth_bytes_per_second(3e11);
  spec->mutable_links()->mutable_inter_node()->set_latency_seconds(2e-5);
  spec->mutable_links()->mutable_inter_node()->set_bandwidth_bytes_per_second(2.5e10);
  return cluster;
}

void BM_SearchPlans(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const chimera::v1::TrainJob job = Gpt(workers);
  const chimera::v1::Cluster cluster = Cluster(workers);
  const chimera::v1::ModelProfile profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  int evaluated = 0;
  std::string best;
  for (auto _ : state) {
    absl::StatusOr<SearchResult> result = SearchPlans(job, cluster, profile, {5});
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    evaluated = result->evaluated;
    best = DescribePlan(result->ranked[0].plan);
  }
  state.counters["candidates"] = evaluated;
  state.SetLabel(best);
}

BENCHMARK(BM_SearchPlans)
    ->ArgName("P")
    ->Arg(64)
    ->Arg(512)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chimera::planner

BENCHMARK_MAIN();
