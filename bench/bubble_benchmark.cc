// Measured bubble ratios against the simulator's prediction, per scheme and
// per worker. For every scheme, runs a small GPT's pipeline with one forked,
// single-threaded process per worker (the worker's harness,
// worker/harness/pipeline_job.h), takes the mean measured forward
// and backward time of every model stage (per whole micro-batch), feeds those
// to schedule::Simulate and prints, per worker, the measured bubble ratio
// (bubble / step time, mean over the measured steps) next to the simulated
// one (idle / makespan). The simulation is given the measured optimizer step
// and, in a second column, the transfers and allreduces as well: messages
// over Gloo on loopback and allreduces through shared memory, as the ranks
// make them, measured first between two forked ranks (a ping-pong and a
// two-rank allreduce at two sizes, fitted to α + β·bytes), with each
// micro-batch's activation bytes and each model stage's gradient bytes.
//
//   bubble_benchmark [--depth 4] [--steps 5] [--warmup 1]   (N = D, dualpipev
//   2D)
//
// A benchmark: it prints markdown tables (docs/runtime-measurements.md) and
// never passes or fails on time; it exits 1 only when a run fails.
#include <ATen/ATen.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/pipeline_runs.h"
#include "common/status_macros.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "tests/support/temp_dir.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"
#include "worker/harness/pipeline_job.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker {
namespace {

using harness::PipelineJob;
using harness::PipelineMeasurements;
using schedule::Instruction;
using schedule::OpKind;
using schedule::Scheme;

constexpr absl::Duration kRunDeadline = absl::Minutes(5);
constexpr absl::Duration kOpTimeout = absl::Seconds(60);

struct Flags {
  int depth = 4;
  int steps = 5;
  int warmup = 1;
};

// Big enough that one op takes milliseconds (timer and scheduler noise stay
// small), small enough that all schemes run in a minute on two cores.
ModelConfig BenchGpt() {
  ModelConfig config;
  config.num_layers = 8;
  config.hidden_size = 128;
  config.ffn_size = 512;
  config.num_heads = 4;
  config.vocab_size = 256;
  config.seq_length = 64;
  config.dtype = at::kFloat;
  return config;
}

// What one message (Gloo on loopback) and one allreduce (shared memory) cost
// between two ranks of this machine, as α + β·bytes,
// and what each transformer block's parameters weigh.
struct LinkCosts {
  double p2p_alpha = 0;
  double p2p_beta = 0;
  double allreduce_alpha = 0;
  double allreduce_beta = 0;
  // Bytes of block i's parameters (block 0 with the embedding, the last
  // with the final norm and head).
  std::vector<double> block_bytes;
};

// Mean seconds of `op` over `repeats` runs after two unmeasured ones.
template <typename Op>
absl::StatusOr<double> MeanSeconds(int repeats, Op op) {
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(op());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) RETURN_IF_ERROR(op());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count() /
         repeats;
}

// Rank `rank` of the two-rank calibration; rank 0 writes the seconds of a
// one-way message and of an allreduce, at each size, then each block's
// parameter bytes, one number per line, to `out`.
absl::Status CalibrateRank(int rank, TcpRendezvous& rendezvous,
                           const std::vector<int64_t>& sizes,
                           const std::string& out) {
  LimitComputeThreads(1);
  GlooOptions gloo;
  gloo.rank = rank;
  gloo.world_size = 2;
  gloo.groups = {{"pair", {0, 1}}};
  gloo.timeout = kOpTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, gloo));
  std::vector<double> seconds;
  for (int64_t bytes : sizes) {
    const at::Tensor tensor = at::zeros({bytes / 4}, at::kFloat);
    const int peer = 1 - rank;
    // A round trip is two one-way messages.
    ASSIGN_OR_RETURN(
        const double round_trip, MeanSeconds(20, [&]() -> absl::Status {
          for (int turn = 0; turn < 2; ++turn) {
            ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                             turn == rank ? comm->Send(tensor, peer, 0)
                                          : comm->Recv(tensor, peer, 0));
            RETURN_IF_ERROR(op->Wait(kOpTimeout));
          }
          return absl::OkStatus();
        }));
    ASSIGN_OR_RETURN(const double allreduce,
                     MeanSeconds(20, [&]() -> absl::Status {
                       ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                                        comm->AllReduceSum(tensor, "pair"));
                       return op->Wait(kOpTimeout);
                     }));
    seconds.push_back(round_trip / 2);
    seconds.push_back(allreduce);
  }
  if (rank != 0) return absl::OkStatus();
  const ModelConfig model = BenchGpt();
  for (int64_t block = 0; block < model.num_layers; ++block) {
    ASSIGN_OR_RETURN(std::shared_ptr<TransformerStage> stage,
                     BuildTransformerStage(model, {block, block + 1}, 0));
    double bytes = 0;
    for (const at::Tensor& parameter : stage->parameters())
      bytes += parameter.nbytes();
    seconds.push_back(bytes);
  }
  std::ofstream file(out);
  for (double value : seconds) file << value << "\n";
  return file.good() ? absl::OkStatus()
                     : absl::InternalError("cannot write " + out);
}

absl::StatusOr<LinkCosts> CalibrateLinks() {
  const std::vector<int64_t> sizes = {4 << 10, 4 << 20};
  const chimera::testing::TempDir dir;
  const std::string out = dir.path() + "/links.txt";
  for (const harness::RankExit& exit : harness::RunForkedRanks(
           2, kRunDeadline, [&](int rank, TcpRendezvous&rendezvous) {
             return CalibrateRank(rank, rendezvous, sizes, out);
           })) {
    if (!exit.ok())
      return absl::InternalError(
          absl::StrCat("link calibration: rank ", exit.rank, " failed"));
  }
  std::ifstream file(out);
  std::vector<double> values;
  for (double value; file >> value;) values.push_back(value);
  const size_t blocks = static_cast<size_t>(BenchGpt().num_layers);
  if (values.size() != 4 + blocks)
    return absl::DataLossError("link calibration wrote " + out +
                               " only in part");
  LinkCosts costs;
  const double span = static_cast<double>(sizes[1] - sizes[0]);
  costs.p2p_beta = (values[2] - values[0]) / span;
  costs.p2p_alpha = values[0] - costs.p2p_beta * sizes[0];
  costs.allreduce_beta = (values[3] - values[1]) / span;
  costs.allreduce_alpha = values[1] - costs.allreduce_beta * sizes[0];
  costs.block_bytes.assign(values.begin() + 4, values.end());
  return costs;
}

// `compute` plus loopback transfers and allreduces: every activation or
// gradient message carries one micro-batch's B·S·H floats, and a model
// stage held by several workers allreduces its parameters' bytes.
schedule::CostModel WithLinks(schedule::CostModel costs,
                              const schedule::Schedule& schedule,
                              const std::vector<LayerRange>& partition,
                              const LinkCosts& links,
                              int64_t micro_batch_size) {
  const ModelConfig model = BenchGpt();
  costs.p2p_alpha = links.p2p_alpha;
  costs.p2p_beta = links.p2p_beta;
  costs.activation_bytes = static_cast<double>(
      micro_batch_size * model.seq_length * model.hidden_size * 4);
  std::vector<int> replicas(partition.size(), 0);
  for (const schedule::WorkerProgram& worker : schedule.workers) {
    for (const schedule::StageRef& ref : worker.stages)
      ++replicas[schedule.topology.ModelStage(ref)];
  }
  for (size_t stage = 0; stage < partition.size(); ++stage) {
    double bytes = 0;
    for (int64_t block = partition[stage].begin; block < partition[stage].end;
         ++block) {
      bytes += links.block_bytes[block];
    }
    costs.stage_allreduce.push_back(replicas[stage] > 1
                                        ? links.allreduce_alpha +
                                              links.allreduce_beta * bytes
                                        : 0);
  }
  return costs;
}

std::vector<std::pair<std::string, schedule::ScheduleParams>> Schemes(
    int depth) {
  std::vector<std::pair<std::string, schedule::ScheduleParams>> schemes;
  const auto add = [&](Scheme scheme, int chunks, int micro_batches) {
    schedule::ScheduleParams params;
    params.scheme = scheme;
    params.depth = depth;
    params.micro_batches = micro_batches;
    params.chunks = chunks;
    std::string name = schedule::SchemeName(scheme);
    if (chunks > 1) absl::StrAppend(&name, " (", chunks, " chunks)");
    schemes.emplace_back(std::move(name), params);
  };
  add(Scheme::kGpipe, 1, depth);
  add(Scheme::kOneFOneB, 1, depth);
  add(Scheme::kGems, 1, depth);
  add(Scheme::kChimera, 1, depth);
  add(Scheme::kMixPipe, 1, depth);
  add(Scheme::kInterleaved, 2, depth);
  add(Scheme::kBreadthFirst, 2, depth);
  add(Scheme::kZbH1, 1, depth);
  add(Scheme::kZbH2, 1, depth);
  add(Scheme::kZbAuto, 1, depth);
  add(Scheme::kZbV, 1, depth);
  // DualPipeV needs N >= 2D.
  add(Scheme::kDualPipeV, 1, 2 * depth);
  add(Scheme::kChimeraZb, 1, depth);
  return schemes;
}

// Seconds of one kind of op on one model stage, summed over micro-batches.
struct OpTotal {
  double seconds = 0;
  int micro_batches = 0;
  double Mean() const { return seconds / micro_batches; }
};

// Mean measured FORWARD / BACKWARD seconds per whole micro-batch of every
// model stage (a split backward's halves each on their own, the whole
// backward their sum where the schedule runs none), and of OPTIMIZER_STEP,
// over the steps after the warm-up.
schedule::CostModel MeasuredCosts(const schedule::Schedule& schedule,
                                  const PipelineMeasurements& measured,
                                  int warmup) {
  const int stages = schedule.topology.NumModelStages();
  std::vector<OpTotal> forward(stages), backward(stages), input(stages),
      weight(stages);
  double optimizer = 0;
  int optimizer_steps = 0;
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    const std::vector<Instruction>& program =
        schedule.workers[rank].instructions;
    for (size_t step = warmup; step < measured.ranks[rank].size(); ++step) {
      const std::vector<double>& seconds =
          measured.ranks[rank][step].op_seconds;
      for (size_t i = 0; i < program.size(); ++i) {
        const Instruction& inst = program[i];
        const int stage =
            schedule.topology.ModelStage({inst.chunk, inst.stage});
        if (inst.op == OpKind::kOptimizerStep) {
          optimizer += seconds[i];
          ++optimizer_steps;
        }
        if (!schedule::IsCompute(inst.op)) continue;
        OpTotal& total = (inst.op == OpKind::kForward    ? forward
                          : inst.op == OpKind::kBackward ? backward
                          : inst.op == OpKind::kBackwardInput ? input
                                                               : weight)[stage];
        if (inst.op == OpKind::kForward) {
          total.seconds += seconds[i];
          total.micro_batches += static_cast<int>(inst.micro_batches.size());
        } else {
          // A part of a halved backward is 1/num_parts of a micro-batch.
          total.seconds += seconds[i] * inst.num_parts;
          ++total.micro_batches;
        }
      }
    }
  }
  schedule::CostModel costs;
  for (int stage = 0; stage < stages; ++stage) {
    const bool split = input[stage].micro_batches > 0;
    costs.stage_forward.push_back(forward[stage].Mean());
    costs.stage_backward.push_back(
        backward[stage].micro_batches > 0
            ? backward[stage].Mean()
            : input[stage].Mean() + weight[stage].Mean());
    // Negative: half the whole backward, for a stage that never splits.
    costs.stage_backward_input.push_back(split ? input[stage].Mean() : -1);
    costs.stage_backward_weight.push_back(split ? weight[stage].Mean() : -1);
  }
  costs.optimizer_step = optimizer_steps > 0 ? optimizer / optimizer_steps : 0;
  return costs;
}

PipelineJob JobFor(schedule::Schedule schedule, const Flags& flags) {
  PipelineJob job =
      harness::MakePipelineJob(std::move(schedule), BenchGpt(),
                              /*micro_batch_size=*/4, /*seed=*/3, kOpTimeout);
  job.spec.optimizer.kind = OptimizerKind::kAdamW;
  job.spec.optimizer.lr = 1e-4;
  job.spec.max_steps = flags.warmup + flags.steps;
  return job;
}

absl::Status RunScheme(const std::string& name,
                       const schedule::ScheduleParams& params,
                       const Flags& flags, const LinkCosts& links) {
  ASSIGN_OR_RETURN(schedule::Schedule schedule,
                   schedule::GenerateSchedule(params));
  const PipelineJob job = JobFor(schedule, flags);
  const chimera::testing::TempDir scratch;
  ASSIGN_OR_RETURN(PipelineMeasurements measured,
                   harness::MeasurePipeline(job, scratch.path(), kRunDeadline));
  const schedule::CostModel costs =
      MeasuredCosts(schedule, measured, flags.warmup);
  ASSIGN_OR_RETURN(schedule::SimulationResult simulated,
                   schedule::Simulate(schedule, costs));
  ASSIGN_OR_RETURN(
      schedule::SimulationResult with_links,
      schedule::Simulate(schedule,
                         WithLinks(costs, schedule, job.spec.partition.stages(),
                                   links, job.spec.micro_batch_size)));

  std::printf("\n### %s, D = %d, N = %d\n\n", name.c_str(), params.depth,
              params.micro_batches);
  std::printf(
      "stage costs (ms, forward/backward per micro-batch, the backward's "
      "input/weight halves in brackets where split):");
  for (size_t s = 0; s < costs.stage_forward.size(); ++s) {
    std::printf(" %.1f/%.1f", 1e3 * costs.stage_forward[s],
                1e3 * costs.stage_backward[s]);
    if (costs.stage_backward_input[s] >= 0) {
      std::printf(" (%.1f/%.1f)", 1e3 * costs.stage_backward_input[s],
                  1e3 * costs.stage_backward_weight[s]);
    }
  }
  std::printf("; optimizer step %.1f ms\n\n", 1e3 * costs.optimizer_step);
  std::printf(
      "| worker | measured bubble | simulated bubble | simulated with links | "
      "measured step (ms) | "
      "simulated step (ms) | with links (ms) "
      "|\n|---|---|---|---|---|---|---|\n");
  double measured_sum = 0;
  double step_sum = 0;
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    double ratio = 0;
    double step_seconds = 0;
    const std::vector<StepMetrics>& steps = measured.ranks[rank];
    for (size_t step = flags.warmup; step < steps.size(); ++step) {
      ratio += schedule::BubbleRatio(steps[step].bubble_seconds, steps[step].step_seconds);
      step_seconds += steps[step].step_seconds;
    }
    ratio /= flags.steps;
    step_seconds /= flags.steps;
    measured_sum += ratio;
    step_sum += step_seconds;
    std::printf("| %zu | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n", rank,
                ratio, simulated.workers[rank].bubble_ratio,
                with_links.workers[rank].bubble_ratio, 1e3 * step_seconds,
                1e3 * simulated.makespan, 1e3 * with_links.makespan);
  }
  const double workers = static_cast<double>(measured.ranks.size());
  std::printf("| mean | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f |\n",
              measured_sum / workers, simulated.bubble_ratio,
              with_links.bubble_ratio, 1e3 * step_sum / workers,
              1e3 * simulated.makespan, 1e3 * with_links.makespan);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::worker::Flags flags;
  CLI::App app{"Measured vs simulated bubble ratios of every scheme"};
  app.add_option("--depth", flags.depth,
                 "Pipeline depth D (N = D; dualpipev N = 2D)")
      ->check(CLI::Range(2, 16));
  app.add_option("--steps", flags.steps, "Measured steps")
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", flags.warmup, "Steps run before measuring")
      ->check(CLI::Range(0, 1000));
  CLI11_PARSE(app, argc, argv);
  const chimera::worker::ModelConfig model = chimera::worker::BenchGpt();
  std::printf(
      "GPT %lld blocks, hidden %lld, FFN %lld, %lld heads, vocabulary %lld, "
      "sequence %lld, float32, micro-batch 4; one single-threaded process "
      "per worker; %d measured steps after %d warm-up\n",
      static_cast<long long>(model.num_layers),
      static_cast<long long>(model.hidden_size),
      static_cast<long long>(model.ffn_size),
      static_cast<long long>(model.num_heads),
      static_cast<long long>(model.vocab_size),
      static_cast<long long>(model.seq_length), flags.steps, flags.warmup);
  const absl::StatusOr<chimera::worker::LinkCosts> links =
      chimera::worker::CalibrateLinks();
  if (!links.ok()) {
    std::fprintf(stderr, "%s\n", links.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "loopback Gloo message %.1f us + %.3f ns/byte, two-rank shared-memory "
      "allreduce %.1f us + %.3f ns/byte\n",
      1e6 * links->p2p_alpha, 1e9 * links->p2p_beta,
      1e6 * links->allreduce_alpha, 1e9 * links->allreduce_beta);
  int exit_code = 0;
  for (const auto& [name, params] : chimera::worker::Schemes(flags.depth)) {
    const absl::Status status =
        chimera::worker::RunScheme(name, params, flags, *links);
    if (!status.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), status.ToString().c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}
