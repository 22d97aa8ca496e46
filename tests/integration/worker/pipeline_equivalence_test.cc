// Pipeline-parallel training is exact: for every synchronous scheme the
// schedule engine generates (with data parallelism, forward doubling, backward
// halving, recomputation, looping chunks and the split backward; GPT, tied as
// GPT-2 under five schemes, Llama with and without tied embeddings under every
// scheme at W = 1 and 2, a TorchScript model that Debian's PyTorch scripts
// under every scheme at W = 1 and 2, optimizer-state sharding, and
// checkpoints resumed under another plan and sharding), worker processes
// executing their programs over Gloo end up with the parameters a single
// process gets by training the whole model on the same mini-batches, to
// 1e-9 relative, and the replicas of every stage are bit-identical across
// ranks. PipeDream and PipeDream-2BW, asynchronous, end up at W = 1 and 2,
// and resumed from a checkpoint, with the parameters of a single process
// that applies their rule (TrainReference).
//
// Each case forks the job's ranks (ProgramExecutor over Gloo on loopback) and
// one more process for the reference (the whole model as one stage, one
// batch of W·N·B samples, the same loss normaliser and optimizer code). Every
// child writes its parameters and losses to a file; the parent compares.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/directory.h"
#include "common/status_macros.h"
#include "schedule/generator.h"
#include "schedule/step_unrolling.h"
#include "schedule/validator.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/split_backward_schedule.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/forked_ranks.h"
#include "worker/harness/pipeline_job.h"
#include "worker/harness/training_record.h"
#include "worker/model/loss.h"
#include "worker/model/stage_factory.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/host_memory.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

using harness::MakePipelineJob;
using harness::PipelineJob;
using harness::RankExit;
using harness::RankRecordPath;
using harness::ReadTrainingRecord;
using harness::RunForkedRanks;
using harness::RunPipelineRank;
using harness::TrainingRecord;
using harness::WriteTrainingRecord;
using schedule::Concat;
using schedule::ScheduleParams;
using schedule::Scheme;

// All of one case's processes; generous, since two cores are shared.
constexpr absl::Duration kCaseDeadline = absl::Seconds(120);
// Any one transfer, allreduce or the joining of the groups.
constexpr absl::Duration kOpTimeout = absl::Seconds(30);
constexpr double kRelativeTolerance = 1e-9;
constexpr int kSteps = 3;
constexpr int kMicroBatchSize = 2;
constexpr uint64_t kSeed = 11;

// Tiny models, float64: the sums of a pipeline and of one big batch then
// agree to ~1e-15, far inside the tolerance, while any wrong gradient does
// not. Llama's four query heads share two key/value heads. The TorchScript
// model is tests/support/scripted_model.py's eight_blocks.
ModelConfig TinyModel(ModelFamily family) {
  const bool scripted = family == ModelFamily::kTorchscript;
  ModelConfig config;
  config.family = family;
  config.num_layers = 8;
  config.hidden_size = scripted ? 8 : 16;
  config.ffn_size = 32;
  config.num_heads = family == ModelFamily::kLlama ? 4 : 2;
  config.num_kv_heads = family == ModelFamily::kLlama ? 2 : 0;
  config.vocab_size = scripted ? 16 : 256;
  config.seq_length = 8;
  config.dtype = at::kDouble;
  return config;
}

struct Case {
  std::string name;
  ScheduleParams params;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  DataFormat data = DataFormat::kSynthetic;
  // Runs the schedule with every backward split and every weight gradient
  // deferred to the end (DeferEveryWeightGradient).
  bool defer_weight_gradients = false;
  ModelFamily family = ModelFamily::kGpt;
  // The head projects by the embedding's weight (GPT, Llama).
  bool tie_embeddings = false;
  // When set, the first kSteps - 1 steps run under these parameters (and
  // their sharding) and checkpoint; the case's own resume from that
  // checkpoint for the last step.
  std::optional<ScheduleParams> resumed_from = std::nullopt;
};

// Names the case in gtest's messages instead of dumping its bytes.
void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

OptimizerConfig OptimizerFor(const Case& c) {
  OptimizerConfig config;
  config.kind = c.optimizer;
  if (c.optimizer == OptimizerKind::kAdamW) {
    config.lr = 1e-2;
    config.weight_decay = 0.1;
  } else {
    config.lr = 0.5;
    config.momentum = 0.9;
    config.weight_decay = 0.01;
  }
  return config;
}

std::string ReferencePath(const std::string& dir) {
  return absl::StrCat(dir, "/reference.bin");
}

// The job of case `c`, whose files (a TorchScript model's pieces) are in
// `dir`.
PipelineJob JobFor(const Case& c, schedule::Schedule s,
                   const std::string& dir) {
  ModelConfig model = TinyModel(c.family);
  model.tie_embeddings = c.tie_embeddings;
  PipelineJob job =
      MakePipelineJob(std::move(s), model, kMicroBatchSize, kSeed, kOpTimeout);
  job.spec.optimizer = OptimizerFor(c);
  job.spec.sharding = c.params.sharding;
  job.spec.data.format = c.data;
  if (c.data == DataFormat::kText) {
    job.spec.data.path = CHIMERA_SOURCE_DIR "/examples/data/corpus.txt";
  }
  if (c.family == ModelFamily::kTorchscript) {
    job.spec.modules = FileUnderRoot{.root = dir, .path = "model"};
  }
  job.spec.max_steps = kSteps;
  return job;
}

// The whole model of `spec`, as one stage.
absl::StatusOr<std::shared_ptr<Stage>> WholeModel(const TaskSpec& spec) {
  const LayerRange all{0, spec.model.num_layers};
  if (!spec.modules) return BuildTransformerStage(spec.model, all, spec.seed);
  ASSIGN_OR_RETURN(const Directory modules, OpenModules(spec.modules));
  ASSIGN_OR_RETURN(const StageFactory factory,
                   StageFactory::Scripted(modules, spec.model, spec.device));
  return factory.Build(all);
}

// The loss of `model` by its definition: our own families' LanguageModelLoss
// of the whole logits (the pipeline computes it a chunk at a time), a
// TorchScript model's scripted loss.
absl::StatusOr<at::Tensor> ReferenceLoss(Stage& model,
                                         const ModelConfig& config,
                                         const MicroBatch& batch,
                                         double normaliser) {
  if (config.family == ModelFamily::kTorchscript) {
    return model.Loss(batch.inputs, batch, normaliser);
  }
  return LanguageModelLoss(model.Forward(batch.inputs), batch, normaliser);
}

std::vector<at::Tensor> Copies(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> copies;
  for (const at::Tensor& tensor : tensors) {
    copies.push_back(tensor.detach().clone());
  }
  return copies;
}

void Assign(std::vector<at::Tensor>& parameters,
            const std::vector<at::Tensor>& values) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) parameters[i].copy_(values[i]);
}

// PipeDream's rule as the programs apply it: for each model stage, the
// updates it made before the forward of each micro-batch (micro-batch j of
// step s is s * N + j), read from the unrolled steps. The pipeline drains
// before step `fresh_from` (a checkpoint's resume) and starts again there.
absl::StatusOr<std::vector<std::vector<int>>> ForwardVersions(
    const schedule::Schedule& repeating, int fresh_from) {
  const schedule::Topology& topology = repeating.topology;
  const int n = topology.micro_batches;
  std::vector<std::vector<int>> versions(topology.NumModelStages(),
                                         std::vector<int>(kSteps * n, -1));
  int first_step = 0;
  for (const int steps : {fresh_from, kSteps - fresh_from}) {
    if (steps == 0) continue;
    ASSIGN_OR_RETURN(const schedule::Schedule unrolled,
                     schedule::UnrollSteps(repeating, steps));
    // Every micro-batch before the segment updated every stage once.
    const int updates_before = first_step * n;
    for (const schedule::WorkerProgram& worker : unrolled.workers) {
      int updates = updates_before;
      for (const schedule::Instruction& inst : worker.instructions) {
        if (inst.op == schedule::OpKind::kOptimizerStep) ++updates;
        if (inst.op != schedule::OpKind::kForward) continue;
        for (int mb : inst.micro_batches) {
          versions[topology.ModelStage({inst.chunk, inst.stage})]
                  [first_step * n + mb] = updates;
        }
      }
    }
    first_step += steps;
  }
  return versions;
}

// The names of each model stage's parameters, as the pipeline's ranks
// record them.
absl::StatusOr<std::vector<std::set<std::string>>> StageParameterNames(
    const TaskSpec& spec) {
  std::vector<std::set<std::string>> names;
  for (int s = 0; s < spec.partition.stage_count(); ++s) {
    ASSIGN_OR_RETURN(
        const std::shared_ptr<TransformerStage> stage,
        BuildTransformerStage(spec.model, spec.partition.stage(s), spec.seed));
    std::set<std::string>& stage_names = names.emplace_back();
    for (const auto& item : stage->named_parameters()) {
      stage_names.insert(item.key());
    }
  }
  return names;
}

// PipeDream's rule in one process: micro-batch k of each of the W
// pipelines runs its forward and backward, on every stage s, on the weights
// after versions[s][k] updates, and their gradient (the mean over their
// samples) updates the newest weights. The pipeline drains before step
// `fresh_from`.
absl::Status TrainStashedReference(const PipelineJob& job, int fresh_from,
                                   const std::string& dir) {
  const ModelConfig& config = job.spec.model;
  const int n = job.schedule.topology.micro_batches;
  const int width = job.schedule.topology.width;
  const int b = job.spec.micro_batch_size;
  ASSIGN_OR_RETURN(const std::vector<std::vector<int>> versions,
                   ForwardVersions(job.schedule, fresh_from));
  ASSIGN_OR_RETURN(const std::vector<std::set<std::string>> stage_names,
                   StageParameterNames(job.spec));
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(job.spec.data));
  ASSIGN_OR_RETURN(std::shared_ptr<Stage> model, WholeModel(job.spec));
  std::vector<std::string> names;
  std::vector<at::Tensor> parameters;
  for (const auto& item : model->named_parameters()) {
    names.push_back(item.key());
    parameters.push_back(item.value());
    parameters.back().mutable_grad() = at::zeros_like(parameters.back());
  }
  Optimizer optimizer(job.spec.optimizer, parameters);
  std::vector<std::vector<at::Tensor>> history = {Copies(parameters)};
  std::vector<double> losses(kSteps, 0.0);
  for (int k = 0; k < kSteps * n; ++k) {
    const int step = k / n;
    {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < parameters.size(); ++i) {
        int stage = 0;
        while (stage_names[stage].count(names[i]) == 0) ++stage;
        parameters[i].copy_(history[versions[stage][k]][i]);
      }
    }
    for (int dp = 0; dp < width; ++dp) {
      const SampleRange samples = MicroBatchSamples(dp, k % n, n, b);
      ASSIGN_OR_RETURN(at::Tensor tokens,
                       data->Samples(step, samples.first, samples.count));
      ASSIGN_OR_RETURN(
          MicroBatch batch,
          MakeMicroBatch(config, tokens, {job.spec.seed, step, samples.first}));
      ASSIGN_OR_RETURN(
          at::Tensor loss,
          ReferenceLoss(*model, config, batch, static_cast<double>(width) * b));
      loss.backward();
      losses[step] += loss.item<double>() / n;
    }
    Assign(parameters, history.back());
    optimizer.Step();
    history.push_back(Copies(parameters));
  }
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t i = 0; i < names.size(); ++i) {
    named.emplace_back(names[i], parameters[i]);
  }
  return WriteTrainingRecord(ReferencePath(dir), named, losses);
}

// The whole model of `job` in one process on the whole mini-batch, under
// the schedule's update rule. An asynchronous pipeline drains before step
// `fresh_from` (where a run resumes from its checkpoint) and starts again
// from the newest weights.
absl::Status TrainReference(const PipelineJob& job, int fresh_from,
                            const std::string& dir) {
  LimitComputeThreads(1);
  RetainFreedHostMemory();
  if (job.schedule.topology.update_rule == schedule::UpdateRule::kStashed) {
    return TrainStashedReference(job, fresh_from, dir);
  }
  const ModelConfig& config = job.spec.model;
  const schedule::Topology& topology = job.schedule.topology;
  const int64_t batch = int64_t{topology.width} * topology.micro_batches *
                        job.spec.micro_batch_size;
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(job.spec.data));
  ASSIGN_OR_RETURN(std::shared_ptr<Stage> model, WholeModel(job.spec));
  std::vector<at::Tensor> parameters = model->parameters();
  for (at::Tensor& parameter : parameters) {
    parameter.mutable_grad() = at::zeros_like(parameter);
  }
  Optimizer optimizer(job.spec.optimizer, parameters);
  // PipeDream-2BW's rule: step b's mini-batch runs on the weights after
  // b - 1 updates (the initial ones for b = 0, and the newest for the step
  // a drained pipeline starts again with), and its gradient updates the
  // newest ones.
  const bool double_buffered =
      topology.update_rule == schedule::UpdateRule::kDoubleBuffered;
  std::vector<at::Tensor> previous = Copies(parameters);
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<at::Tensor> newest = Copies(parameters);
    if (step == fresh_from) previous = newest;
    if (double_buffered) Assign(parameters, previous);
    ASSIGN_OR_RETURN(at::Tensor tokens, data->Samples(step, 0, batch));
    ASSIGN_OR_RETURN(MicroBatch mini_batch,
                     MakeMicroBatch(config, tokens, {job.spec.seed, step, 0}));
    ASSIGN_OR_RETURN(
        at::Tensor loss,
        ReferenceLoss(*model, config, mini_batch, static_cast<double>(batch)));
    loss.backward();
    losses.push_back(loss.item<double>());
    Assign(parameters, newest);
    optimizer.Step();
    previous = newest;
  }
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : model->named_parameters()) {
    named.emplace_back(item.key(), item.value());
  }
  return WriteTrainingRecord(ReferencePath(dir), named, losses);
}

void ExpectAllSucceeded(const std::vector<RankExit>& exits) {
  for (const RankExit& exit : exits) EXPECT_TRUE(exit.ok()) << exit;
}

// Largest |a - b| over the largest |b|.
double RelativeDifference(const std::vector<double>& a,
                          const std::vector<double>& b) {
  double difference = 0;
  double scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    difference = std::max(difference, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale == 0 ? difference : difference / scale;
}

// The first kSteps - 1 steps of case `c` under `plan`, checkpointed under
// `dir`.
void TrainUntilTheLastStep(const Case& c, const ScheduleParams& params,
                           const std::string& dir) {
  const absl::StatusOr<schedule::Schedule> generated =
      schedule::GenerateSchedule(params);
  ASSERT_TRUE(generated.ok()) << generated.status();
  PipelineJob job = JobFor(c, *generated, dir);
  job.spec.sharding = params.sharding;
  job.spec.max_steps = kSteps - 1;
  job.checkpoint_root = dir;
  ExpectAllSucceeded(
      RunForkedRanks(static_cast<int>(job.schedule.workers.size()),
                     kCaseDeadline, [&](int rank, TcpRendezvous& rendezvous) {
                       return RunPipelineRank(job, "", rank, rendezvous);
                     }));
}

class PipelineEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalenceTest, TrainsExactlyLikeOneProcessOnTheWholeBatch) {
  const Case& c = GetParam();
  absl::StatusOr<schedule::Schedule> generated =
      schedule::GenerateSchedule(c.params);
  ASSERT_TRUE(generated.ok()) << generated.status();
  if (c.defer_weight_gradients) {
    generated = chimera::testing::DeferEveryWeightGradient(*generated);
  }
  const absl::Status valid = schedule::ValidateSchedule(*generated);
  ASSERT_TRUE(valid.ok()) << valid;
  const chimera::testing::TempDir dir;
  if (c.family == ModelFamily::kTorchscript) {
    const chimera::testing::ProcessResult exported =
        chimera::testing::ExportScriptedModel(dir.path() + "/model",
                                              "eight_blocks");
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
  }
  PipelineJob job = JobFor(c, *generated, dir.path());
  const int world = static_cast<int>(job.schedule.workers.size());

  ExpectAllSucceeded(RunForkedRanks(1, kCaseDeadline, [&](int, TcpRendezvous&) {
    return TrainReference(job, c.resumed_from ? kSteps - 1 : 0, dir.path());
  }));
  if (c.resumed_from) {
    job.checkpoint_root = dir.path();
    job.first_step = kSteps - 1;
    TrainUntilTheLastStep(c, *c.resumed_from, dir.path());
  }
  ExpectAllSucceeded(RunForkedRanks(
      world, kCaseDeadline, [&](int rank, TcpRendezvous& rendezvous) {
        return RunPipelineRank(job, RankRecordPath(dir.path(), rank), rank,
                               rendezvous);
      }));
  if (HasFailure()) return;
  const int steps_run = kSteps - static_cast<int>(job.first_step);

  const absl::StatusOr<TrainingRecord> reference =
      ReadTrainingRecord(ReferencePath(dir.path()));
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(reference->losses.size(), kSteps);
  // The reference trains: otherwise matching it would prove little.
  EXPECT_GT(std::abs(reference->losses.back() - reference->losses.front()),
            1e-3);

  std::vector<double> loss_sums(steps_run, 0.0);
  // name -> the first rank's values, to compare the other replicas with.
  std::map<std::string, std::pair<int, std::vector<double>>> replicas;
  for (int rank = 0; rank < world; ++rank) {
    const absl::StatusOr<TrainingRecord> record =
        ReadTrainingRecord(RankRecordPath(dir.path(), rank));
    ASSERT_TRUE(record.ok()) << record.status();
    ASSERT_EQ(record->losses.size(), static_cast<size_t>(steps_run));
    for (int step = 0; step < steps_run; ++step) {
      loss_sums[step] += record->losses[step];
    }
    for (const auto& [name, values] : record->parameters) {
      const auto expected = reference->parameters.find(name);
      ASSERT_NE(expected, reference->parameters.end()) << name;
      ASSERT_EQ(values.size(), expected->second.size()) << name;
      EXPECT_LE(RelativeDifference(values, expected->second),
                kRelativeTolerance)
          << name << " on rank " << rank;
      const auto [first, inserted] =
          replicas.emplace(name, std::make_pair(rank, values));
      if (!inserted) {
        EXPECT_EQ(values, first->second.second)
            << name << ": rank " << rank << " differs from its replica on rank "
            << first->second.first;
      }
    }
  }
  EXPECT_EQ(replicas.size(), reference->parameters.size())
      << "some parameters are held by no rank";
  for (int step = 0; step < steps_run; ++step) {
    const double expected = reference->losses[job.first_step + step];
    EXPECT_NEAR(loss_sums[step], expected, kRelativeTolerance * expected)
        << "step " << job.first_step + step;
  }
}

ScheduleParams Params(Scheme scheme, int depth, int micro_batches, int width) {
  ScheduleParams params;
  params.scheme = scheme;
  params.depth = depth;
  params.micro_batches = micro_batches;
  params.width = width;
  return params;
}

ScheduleParams TwoChunks(ScheduleParams looping) {
  looping.chunks = 2;
  return looping;
}

// One schedule of every scheme the engine generates, small enough for two
// cores.
struct Shape {
  std::string name;
  Scheme scheme;
  int depth, micro_batches, chunks;
};

std::vector<Shape> EveryScheme() {
  return {
      {"Gpipe", Scheme::kGpipe, 4, 4, 1},
      {"OneFOneB", Scheme::kOneFOneB, 4, 4, 1},
      {"Gems", Scheme::kGems, 4, 4, 1},
      {"Chimera", Scheme::kChimera, 4, 4, 1},
      {"MixPipe", Scheme::kMixPipe, 4, 8, 1},
      {"Interleaved", Scheme::kInterleaved, 2, 4, 2},
      {"BreadthFirst", Scheme::kBreadthFirst, 2, 4, 2},
      {"ZeroBubbleH1", Scheme::kZbH1, 4, 4, 1},
      {"ZeroBubbleH2", Scheme::kZbH2, 2, 4, 1},
      {"ZeroBubbleAuto", Scheme::kZbAuto, 2, 4, 1},
      {"ZeroBubbleV", Scheme::kZbV, 2, 4, 1},
      {"DualPipeV", Scheme::kDualPipeV, 2, 4, 1},
      {"ChimeraZb", Scheme::kChimeraZb, 2, 4, 1},
  };
}

ScheduleParams ParamsOf(const Shape& shape, int width) {
  ScheduleParams params =
      Params(shape.scheme, shape.depth, shape.micro_batches, width);
  params.chunks = shape.chunks;
  return params;
}

// Llama under every scheme, at W = 1 and 2, alternating the optimizers, on
// the corpus (uniform synthetic tokens leave a bias-free model too little to
// learn in three steps for the reference's check); and with tied embeddings
// at W = 1 and 2, AdamW, where the first and last stages' copies of the
// embedding's weight must stay equal to each other and to the reference.
void AddLlamaCases(std::vector<Case>& cases) {
  for (const Shape& shape : EveryScheme()) {
    for (const bool tied : {false, true}) {
      for (const int width : {1, 2}) {
        Case c;
        c.name =
            absl::StrCat("Llama", tied ? "Tied" : "", shape.name, "D",
                         shape.depth, "N", shape.micro_batches, "W", width);
        c.params = ParamsOf(shape, width);
        c.optimizer =
            width == 1 || tied ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
        c.family = ModelFamily::kLlama;
        c.data = DataFormat::kText;
        c.tie_embeddings = tied;
        cases.push_back(std::move(c));
      }
    }
  }
}

// GPT tied as GPT-2 is (a head with no bias; positions on the first stage
// only), where the copies sit on different ranks (1F1B, interleaved,
// Chimera, DualPipeV at W = 2) and on one (ZB-V at W = 1).
void AddTiedGptCases(std::vector<Case>& cases) {
  for (auto [name, params] : {
           std::pair{"OneFOneBD4N4W2", Params(Scheme::kOneFOneB, 4, 4, 2)},
           {"InterleavedD2N4W2Chunks2", Params(Scheme::kInterleaved, 2, 4, 2)},
           {"ChimeraD4N4W2", Params(Scheme::kChimera, 4, 4, 2)},
           {"ZeroBubbleVD2N4", Params(Scheme::kZbV, 2, 4, 1)},
           {"DualPipeVD2N4W2", Params(Scheme::kDualPipeV, 2, 4, 2)},
       }) {
    Case c;
    c.name = absl::StrCat("GptTied", name);
    c.params = params;
    if (params.scheme == Scheme::kInterleaved) c.params.chunks = 2;
    c.tie_embeddings = true;
    cases.push_back(std::move(c));
  }
}

// Sharding in groups of 2 and 4 (Chimera at W = 2), of the optimizer's state
// (ZeRO-1), of the gradients' sum as well (DP_PS), and of the parameters too
// (DP_FS): each member steps its shard of a stage and gathers the others'.
// The tied case steps the embedding's copies whole beside the shards.
void AddShardedCases(std::vector<Case>& cases) {
  struct Sharded {
    const char* name;
    ScheduleParams params;
    OptimizerKind optimizer;
    bool tie_embeddings = false;
  };
  for (Sharded sharded : {
           Sharded{"OneFOneBD4N4W2", Params(Scheme::kOneFOneB, 4, 4, 2),
                   OptimizerKind::kAdamW},
           Sharded{"InterleavedD2N4W2Chunks2",
                   TwoChunks(Params(Scheme::kInterleaved, 2, 4, 2)),
                   OptimizerKind::kSgd},
           Sharded{"BreadthFirstD2N4W2Chunks2",
                   TwoChunks(Params(Scheme::kBreadthFirst, 2, 4, 2)),
                   OptimizerKind::kAdamW},
           Sharded{"ChimeraD4N4", Params(Scheme::kChimera, 4, 4, 1),
                   OptimizerKind::kSgd},
           Sharded{"ChimeraD4N4W2", Params(Scheme::kChimera, 4, 4, 2),
                   OptimizerKind::kAdamW},
           Sharded{"GptTiedChimeraD4N4W2", Params(Scheme::kChimera, 4, 4, 2),
                   OptimizerKind::kAdamW, true},
       }) {
    for (const auto& [mode, prefix] :
         {std::pair{schedule::Sharding::kOptimizer, "ShardedOptimizer"},
          std::pair{schedule::Sharding::kGradientsAndOptimizer,
                    "ShardedGradientsAndOptimizer"},
          std::pair{schedule::Sharding::kFull, "ShardedFull"}}) {
      Case c;
      c.name = absl::StrCat(prefix, sharded.name);
      c.params = sharded.params;
      c.optimizer = sharded.optimizer;
      c.tie_embeddings = sharded.tie_embeddings;
      c.params.sharding = mode;
      cases.push_back(std::move(c));
    }
  }
}

// Checkpoints across sharding and plans: a job trained sharded resumes
// unsharded under another partition, an unsharded one sharded, and one
// sharded in groups of 4 (with a tied embedding's copies stepped whole) in
// groups of 2. Each mini-batch is W·N·B = 16 samples under both plans.
void AddShardedResumeCases(std::vector<Case>& cases) {
  const auto sharded = [](ScheduleParams params,
                          schedule::Sharding mode =
                              schedule::Sharding::kOptimizer) {
    params.sharding = mode;
    return params;
  };
  struct Resume {
    const char* name;
    ScheduleParams before;
    ScheduleParams after;
    OptimizerKind optimizer;
    bool tie_embeddings = false;
  };
  for (const Resume& resume : {
           Resume{"ShardedChimeraD4N4W2AsOneFOneBD2N8",
                  sharded(Params(Scheme::kChimera, 4, 4, 2)),
                  Params(Scheme::kOneFOneB, 2, 8, 1), OptimizerKind::kAdamW},
           Resume{"GpipeD2N8AsShardedChimeraD4N4W2",
                  Params(Scheme::kGpipe, 2, 8, 1),
                  sharded(Params(Scheme::kChimera, 4, 4, 2)),
                  OptimizerKind::kSgd},
           Resume{"GptTiedShardedChimeraD4N4W2AsShardedOneFOneBD2N4W2",
                  sharded(Params(Scheme::kChimera, 4, 4, 2)),
                  sharded(Params(Scheme::kOneFOneB, 2, 4, 2)),
                  OptimizerKind::kAdamW, true},
           Resume{"GptTiedShardedGradientsChimeraD4N4W2AsShardedOneFOneBD2N4W2",
                  sharded(Params(Scheme::kChimera, 4, 4, 2),
                          schedule::Sharding::kGradientsAndOptimizer),
                  sharded(Params(Scheme::kOneFOneB, 2, 4, 2)),
                  OptimizerKind::kAdamW, true},
           Resume{"ShardedGradientsBreadthFirstD2N4W2Chunks2AsOneFOneBD2N8",
                  sharded(TwoChunks(Params(Scheme::kBreadthFirst, 2, 4, 2)),
                          schedule::Sharding::kGradientsAndOptimizer),
                  Params(Scheme::kOneFOneB, 2, 8, 1), OptimizerKind::kAdamW},
           // Sharding full saves each member's shard of the parameters too.
           Resume{"ShardedFullOneFOneBD2N2W4AsOneFOneBD2N8",
                  sharded(Params(Scheme::kOneFOneB, 2, 2, 4),
                          schedule::Sharding::kFull),
                  Params(Scheme::kOneFOneB, 2, 8, 1), OptimizerKind::kAdamW},
           Resume{"GptTiedShardedFullChimeraD4N4W2AsShardedOneFOneBD2N4W2",
                  sharded(Params(Scheme::kChimera, 4, 4, 2),
                          schedule::Sharding::kFull),
                  sharded(Params(Scheme::kOneFOneB, 2, 4, 2)),
                  OptimizerKind::kAdamW, true},
           Resume{"GpipeD2N8AsShardedFullBreadthFirstD2N4W2Chunks2",
                  Params(Scheme::kGpipe, 2, 8, 1),
                  sharded(TwoChunks(Params(Scheme::kBreadthFirst, 2, 4, 2)),
                          schedule::Sharding::kFull),
                  OptimizerKind::kSgd},
       }) {
    Case c;
    c.name = absl::StrCat("Resume", resume.name);
    c.params = resume.after;
    c.resumed_from = resume.before;
    c.optimizer = resume.optimizer;
    c.tie_embeddings = resume.tie_embeddings;
    cases.push_back(std::move(c));
  }
}

// A TorchScript model under every scheme, at W = 1 and 2, alternating the
// optimizers: its pieces' own parameters, scripted autograd graphs (which
// the split backward takes apart) and scripted loss.
void AddScriptedCases(std::vector<Case>& cases) {
  for (const Shape& shape : EveryScheme()) {
    for (const int width : {1, 2}) {
      Case c;
      c.name = absl::StrCat("TorchScript", shape.name, "D", shape.depth, "N",
                            shape.micro_batches, "W", width);
      c.params = ParamsOf(shape, width);
      c.optimizer = width == 1 ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
      c.family = ModelFamily::kTorchscript;
      cases.push_back(std::move(c));
    }
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const auto add = [&](std::string name, ScheduleParams params,
                       OptimizerKind optimizer = OptimizerKind::kAdamW,
                       DataFormat data = DataFormat::kSynthetic) {
    cases.push_back({std::move(name), params, optimizer, data});
    return &cases.back().params;
  };
  add("GpipeD4N4", Params(Scheme::kGpipe, 4, 4, 1));
  add("OneFOneBD4N6W2Sgd", Params(Scheme::kOneFOneB, 4, 6, 2),
      OptimizerKind::kSgd, DataFormat::kText);
  add("OneFOneBD4N4Recompute", Params(Scheme::kOneFOneB, 4, 4, 1))->recompute =
      true;
  add("GemsD4N4", Params(Scheme::kGems, 4, 4, 1), OptimizerKind::kSgd);
  add("ChimeraD4N2", Params(Scheme::kChimera, 4, 2, 1), OptimizerKind::kSgd);
  add("ChimeraD4N4W2", Params(Scheme::kChimera, 4, 4, 2));
  add("ChimeraD4N8Direct", Params(Scheme::kChimera, 4, 8, 1),
      OptimizerKind::kAdamW, DataFormat::kText);
  add("ChimeraD4N8ForwardDoubling", Params(Scheme::kChimera, 4, 8, 1))->concat =
      Concat::kForwardDoubling;
  add("ChimeraD4N8BackwardHalving", Params(Scheme::kChimera, 4, 8, 1),
      OptimizerKind::kSgd)
      ->concat = Concat::kBackwardHalving;
  add("ChimeraD2N4W2BackwardHalving", Params(Scheme::kChimera, 2, 4, 2))
      ->concat = Concat::kBackwardHalving;
  add("ChimeraD4FourPipelinesN4", Params(Scheme::kChimera, 4, 4, 1))
      ->pipelines = 4;
  add("ChimeraD4N4W2Recompute", Params(Scheme::kChimera, 4, 4, 2),
      OptimizerKind::kSgd)
      ->recompute = true;
  add("MixPipeD4N8", Params(Scheme::kMixPipe, 4, 8, 1));
  add("InterleavedD2N4W2Chunks2", Params(Scheme::kInterleaved, 2, 4, 2))
      ->chunks = 2;
  add("BreadthFirstD4N4Chunks2", Params(Scheme::kBreadthFirst, 4, 4, 1),
      OptimizerKind::kSgd)
      ->chunks = 2;
  add("ZeroBubbleH1D4N4W2", Params(Scheme::kZbH1, 4, 4, 2));
  add("ZeroBubbleH1D2N4Sgd", Params(Scheme::kZbH1, 2, 4, 1),
      OptimizerKind::kSgd);
  add("ZeroBubbleH2D4N8", Params(Scheme::kZbH2, 4, 8, 1));
  add("ZeroBubbleH2D2N4W2Recompute", Params(Scheme::kZbH2, 2, 4, 2))
      ->recompute = true;
  add("ZeroBubbleAutoD4N6Limit3", Params(Scheme::kZbAuto, 4, 6, 1),
      OptimizerKind::kSgd, DataFormat::kText)
      ->activation_limit = 3;
  add("ZeroBubbleAutoD2N4W2", Params(Scheme::kZbAuto, 2, 4, 2));
  add("ZeroBubbleVD2N4", Params(Scheme::kZbV, 2, 4, 1), OptimizerKind::kAdamW,
      DataFormat::kText);
  add("ZeroBubbleVD2N3W2Recompute", Params(Scheme::kZbV, 2, 3, 2),
      OptimizerKind::kSgd)
      ->recompute = true;
  add("DualPipeVD2N4", Params(Scheme::kDualPipeV, 2, 4, 1));
  add("DualPipeVD2N5W2Recompute", Params(Scheme::kDualPipeV, 2, 5, 2))
      ->recompute = true;
  add("ChimeraZbD4N8", Params(Scheme::kChimeraZb, 4, 8, 1));
  add("ChimeraZbD4N4W2", Params(Scheme::kChimeraZb, 4, 4, 2),
      OptimizerKind::kSgd);
  add("ChimeraZbD2N4W2Recompute", Params(Scheme::kChimeraZb, 2, 4, 2))
      ->recompute = true;
  // PipeDream and PipeDream-2BW against their own rules, applied by the
  // reference.
  add("PipeDreamD2N2", Params(Scheme::kPipeDream, 2, 2, 1),
      OptimizerKind::kSgd);
  add("PipeDreamD4N4", Params(Scheme::kPipeDream, 4, 4, 1));
  add("PipeDreamD4N6Recompute", Params(Scheme::kPipeDream, 4, 6, 1),
      OptimizerKind::kAdamW, DataFormat::kText)
      ->recompute = true;
  add("PipeDreamD2N3W2", Params(Scheme::kPipeDream, 2, 3, 2),
      OptimizerKind::kSgd);
  add("PipeDreamD2N2W2Text", Params(Scheme::kPipeDream, 2, 2, 2),
      OptimizerKind::kAdamW, DataFormat::kText);
  add("PipeDream2BwD2N2", Params(Scheme::kPipeDream2Bw, 2, 2, 1));
  add("PipeDream2BwD2N3W2", Params(Scheme::kPipeDream2Bw, 2, 3, 2));
  add("PipeDream2BwD4N6Sgd", Params(Scheme::kPipeDream2Bw, 4, 6, 1),
      OptimizerKind::kSgd, DataFormat::kText);
  add("PipeDream2BwD4N4Recompute", Params(Scheme::kPipeDream2Bw, 4, 4, 1),
      OptimizerKind::kAdamW, DataFormat::kText)
      ->recompute = true;
  // 2BW with the embedding tied across the end stages: each update sums the
  // copies' gradients of its step.
  add("GptTiedPipeDream2BwD4N4W2", Params(Scheme::kPipeDream2Bw, 4, 4, 2));
  cases.back().tie_embeddings = true;
  add("GptTiedPipeDream2BwD2N3Sgd", Params(Scheme::kPipeDream2Bw, 2, 3, 1),
      OptimizerKind::kSgd);
  cases.back().tie_embeddings = true;
  // Resumed from a checkpoint (PipeDream's under its own plan, 2BW's under
  // a deeper one), before which the pipeline drained.
  add("ResumePipeDreamD2N2W2", Params(Scheme::kPipeDream, 2, 2, 2),
      OptimizerKind::kSgd);
  cases.back().resumed_from = cases.back().params;
  add("ResumePipeDream2BwD2N4AsD4N4", Params(Scheme::kPipeDream2Bw, 4, 4, 1));
  cases.back().resumed_from = Params(Scheme::kPipeDream2Bw, 2, 4, 1);
  // DAPPLE's stage replication: each replica runs its slice of every
  // micro-batch, a stage's gradients are summed over all its replicas.
  const auto add_replicated =
      [&](std::string name, ScheduleParams params, std::vector<int> replication,
          OptimizerKind optimizer = OptimizerKind::kAdamW) {
        params.replication = std::move(replication);
        return add(std::move(name), params, optimizer);
      };
  add_replicated("OneFOneBReplicated2To1N2", Params(Scheme::kOneFOneB, 2, 2, 1),
                 {2, 1});
  add_replicated("OneFOneBReplicated1To2N3W2",
                 Params(Scheme::kOneFOneB, 2, 3, 2), {1, 2},
                 OptimizerKind::kSgd);
  add_replicated("GpipeReplicated1To2N2", Params(Scheme::kGpipe, 2, 2, 1),
                 {1, 2}, OptimizerKind::kSgd);
  add_replicated("OneFOneBReplicated2To1N2W2",
                 Params(Scheme::kOneFOneB, 2, 2, 2), {2, 1})
      ->recompute = true;
  add_replicated("OneFOneBReplicated2To1To1N3",
                 Params(Scheme::kOneFOneB, 3, 3, 1), {2, 1, 1},
                 OptimizerKind::kSgd);
  add_replicated("GpipeReplicated2To1To1N2W2", Params(Scheme::kGpipe, 3, 2, 2),
                 {2, 1, 1});
  add_replicated("OneFOneBReplicated1To2TiedN2",
                 Params(Scheme::kOneFOneB, 2, 2, 1), {1, 2});
  cases.back().tie_embeddings = true;
  // A replicated stage shards over all its replicas, a group of r x W; a
  // stage on one worker of one pipeline has nothing to shard over.
  add_replicated("ShardedOptimizerOneFOneBReplicated2To1N2",
                 Params(Scheme::kOneFOneB, 2, 2, 1), {2, 1})
      ->sharding = schedule::Sharding::kOptimizer;
  add_replicated("ShardedGradientsAndOptimizerOneFOneBReplicated1To2N3W2",
                 Params(Scheme::kOneFOneB, 2, 3, 2), {1, 2},
                 OptimizerKind::kSgd)
      ->sharding = schedule::Sharding::kGradientsAndOptimizer;
  add_replicated("ShardedFullGpipeReplicated2To1To1N2W2",
                 Params(Scheme::kGpipe, 3, 2, 2), {2, 1, 1})
      ->sharding = schedule::Sharding::kFull;
  add_replicated("ShardedFullOneFOneBReplicated1To2TiedN2",
                 Params(Scheme::kOneFOneB, 2, 2, 1), {1, 2})
      ->sharding = schedule::Sharding::kFull;
  cases.back().tie_embeddings = true;
  // Split backwards of the fused schedules, every weight gradient deferred.
  const auto add_split = [&](std::string name, ScheduleParams params,
                             OptimizerKind optimizer = OptimizerKind::kAdamW) {
    add(std::move(name), params, optimizer);
    cases.back().defer_weight_gradients = true;
    return &cases.back().params;
  };
  add_split("OneFOneBD4N4SplitBackward", Params(Scheme::kOneFOneB, 4, 4, 1));
  add_split("OneFOneBD4N4W2SplitBackward", Params(Scheme::kOneFOneB, 4, 4, 2),
            OptimizerKind::kSgd);
  add_split("ChimeraD4N4W2SplitBackward", Params(Scheme::kChimera, 4, 4, 2));
  add_split("OneFOneBD4N4W2SplitBackwardRecompute",
            Params(Scheme::kOneFOneB, 4, 4, 2))
      ->recompute = true;
  add_split("ChimeraD4N8SplitBackwardHalving",
            Params(Scheme::kChimera, 4, 8, 1), OptimizerKind::kSgd)
      ->concat = Concat::kBackwardHalving;
  AddTiedGptCases(cases);
  AddShardedCases(cases);
  AddShardedResumeCases(cases);
  AddLlamaCases(cases);
  AddScriptedCases(cases);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schemes, PipelineEquivalenceTest,
                         ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace chimera::worker
