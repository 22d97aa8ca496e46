// Runs one worker's program of a pipeline schedule with LibTorch: builds the
// stage replicas the program lists, then executes the instructions in order,
// once per training iteration (RunStep), and measures every op.
//
//   TaskSpec spec;
//   spec.model = config;
//   ASSIGN_OR_RETURN(spec.partition, Partition::Even(8, 4));  // 4 model stages
//   spec.micro_batch_size = 2;
//   spec.optimizer = {.kind = OptimizerKind::kAdamW, .lr = 1e-3};
//   ASSIGN_OR_RETURN(auto executor, ProgramExecutor::Create(
//                        rank_schedule, spec, *data, comm.get()));
//   for (int64_t step = 0; step < steps; ++step) {
//     ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
//   }
//
// What the instructions do:
// - FORWARD: the model's first stage reads its micro-batch's tokens from the
//   DataSource (samples MicroBatchSamples(dp_rank, mb, N, B) of the step);
//   other stages take the activation a RECV_ACT (or the local previous stage)
//   delivered. The model's last stage reads the same samples' targets and
//   computes the loss with normaliser W·N·B, so the gradients summed over all
//   micro-batches and replicas are those of the mini-batch's mean loss. A
//   forward of two micro-batches (forward doubling) runs them one after the
//   other: each then has exactly the graph a single forward gives it.
// - The forward is run per backward part: when the program splits a
//   micro-batch's backward into P parts (backward halving), the forward runs
//   on each slice of B/P samples separately and stashes each slice, so part p
//   of the backward is exactly the backward of samples [p·B/P, (p+1)·B/P).
//   Every sample's computation is independent of the others', so this is the
//   same function as the whole-batch forward.
// - Recompute (a BACKWARD or BACKWARD_INPUT with recompute set): the forward
//   runs without autograd and stashes only the stage input; the backward
//   re-runs it with autograd first.
// - BACKWARD: part `part` of the micro-batch; the last stage backpropagates
//   its loss, the others the output gradient RECV_GRAD delivered. The slice's
//   stash entry is freed here. Gradients accumulate into the parameters.
// - BACKWARD_INPUT / BACKWARD_WEIGHT (the split backward, SplitGradient):
//   BACKWARD_INPUT does what BACKWARD does for the input gradient (recompute
//   included) and accumulates no parameter gradient; the slice's stash entry
//   stays, holding what the weights' gradients need, until the
//   BACKWARD_WEIGHT of the same slice accumulates them and frees it. On the
//   model's first stage (token ids in) BACKWARD_INPUT computes nothing and
//   BACKWARD_WEIGHT the whole backward. Each slice has one BACKWARD, or one
//   BACKWARD_INPUT and after it one BACKWARD_WEIGHT, which never recomputes.
// - SEND_* / RECV_*: asynchronous sends (waited at the end of the step),
//   receives that block until the data is there (bounded by p2p_timeout),
//   tagged per activation edge, micro-batch and part (MessageTags).
// - ALLREDUCE_BEGIN / END: non-blocking sum of one model stage's gradients
//   over its group (GradientGroups), every rank holding a replica of it.
//   REDUCE_SCATTER_BEGIN / END: the same sum into the rank's own shard only.
// - With spec.sharding other than kNone, a model stage held by several
//   ranks is sharded (ShardedOptimizer): SHARD_STEP steps the rank's shard
//   of it, ALLGATHER_BEGIN / END gather the others' updated shards. Only
//   such a stage may have these ops, and it must have its SHARD_STEP.
//   Under sharding full the rank keeps its shard apart: each step starts
//   with the stage's parameters released, a gather brings them whole before
//   a use and RELEASE_PARAMS frees them again.
//   Where its gradients are reduce-scattered, its gradient bucket is held
//   from its first weight gradient of the step until its SHARD_STEP only
//   (GradientBucket::Lifetime::kStep).
// - OPTIMIZER_STEP: Optimizer::Step of every stage not sharded, which also
//   zeroes the gradients; a sharded stage's tied embedding copy is stepped
//   here, whole.
// - With tied embeddings split across stages, the copies' gradient sum
//   (TiedEmbeddingSync) starts after the rank's last backward of the first
//   or last model stage and is waited for by OPTIMIZER_STEP.
//
// - An asynchronous schedule's program is one step that every step repeats
//   (schedule::Topology::repeating): its ops on negative micro-batches act on
//   the previous step's (j - N is micro-batch j), whose stashed forwards the
//   step carries over; the first step skips them, and DrainPipeline runs
//   only them after the last step (or before a checkpoint). Each compute op
//   runs on the weight version its rule says, and OPTIMIZER_STEP writes the
//   next version beside the ones still in use (AsynchronousWeights); steps
//   count from the executor's first, or from the last drain: the pipeline
//   then starts again from the newest weights, as a run resumed from them
//   does. Under PipeDream's rule every micro-batch's loss is divided by the
//   samples one update learns from (one micro-batch per pipeline), under the
//   others by the mini-batch's.
//
// Replicas of one model stage on the same worker (chunks that hold the same
// partition) share one set of parameters, so their gradients add up locally
// and the worker joins the stage's allreduce once.
#ifndef CHIMERA_WORKER_RUNTIME_PROGRAM_EXECUTOR_H_
#define CHIMERA_WORKER_RUNTIME_PROGRAM_EXECUTOR_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/rank_schedule.h"
#include "worker/comm/communicator.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/runtime/activation_stash.h"
#include "worker/runtime/asynchronous_weights.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/gradient_bucket.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/message_tags.h"
#include "worker/runtime/op_position.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/sharded_optimizer.h"
#include "worker/runtime/step_metrics.h"
#include "worker/runtime/task_spec.h"
#include "worker/runtime/tied_embedding_sync.h"

namespace chimera::worker {

class Stage;

// A parameter and its name in the whole model ("layer3.qkv_weight").
using NamedTensor = std::pair<std::string, at::Tensor>;

// One model stage's trainable state: its parameters, by their names in the
// whole model, and its optimizer's state in the same order. What a
// checkpoint holds of the stage.
struct StageState {
  std::vector<NamedTensor> parameters;
  OptimizerState optimizer;
};

// A parameter's optimizer moments, or a piece of them: elements
// [offset, offset + n) of the flattened moments.
struct MomentPiece {
  std::string name;  // the parameter's
  // nullopt: the whole moments, shaped as the parameter.
  std::optional<int64_t> offset;
  // Undefined where the optimizer has none (yet).
  at::Tensor first;
  at::Tensor second;
};

// A piece of a parameter's values: elements [offset, offset + n) of the
// flattened parameter of `shape`.
struct ParameterPiece {
  std::string name;
  int64_t offset = 0;
  std::vector<int64_t> shape;
  at::Tensor values;  // 1-D
};

// What one rank saves of a model stage in a checkpoint. Without sharding,
// the whole state (part {0, 1}). Where the stage's optimizer state is
// sharded over its gradient group (spec.sharding), member i's part: the
// moments of its shard (ShardOf), and with member 0's part the parameters,
// which every member holds whole, and the moments of what is stepped whole
// (a tied embedding's copy). Under sharding full no member holds the
// parameters whole between steps: each part holds its shard of them, as
// whole parameters where the shard covers one and pieces where it cuts one.
// The tensors are the live ones, not copies.
struct StagePart {
  GroupMember part;
  std::vector<NamedTensor> parameters;
  std::vector<ParameterPiece> parameter_pieces;
  int64_t optimizer_steps = 0;
  std::vector<MomentPiece> moments;
};

class ProgramExecutor {
 public:
  // Builds the stage replicas of `schedule.program` and checks the program
  // against `spec` (its model, partition, device, seed, micro-batch size,
  // optimizer and timeouts; the runner reads the rest). `data` and `comm`
  // must outlive the executor; `comm` (with the groups of
  // GradientGroups(schedule.outline)) may be null only when the program has
  // no transfer or allreduce. Starts the device's memory accounting before
  // building anything. INVALID_ARGUMENT naming the field or instruction that
  // does not fit; FAILED_PRECONDITION for a device this process cannot
  // compute on.
  static absl::StatusOr<std::unique_ptr<ProgramExecutor>> Create(
      const schedule::RankSchedule& schedule, const TaskSpec& spec,
      const DataSource& data, Communicator* comm);

  ~ProgramExecutor();
  ProgramExecutor(const ProgramExecutor&) = delete;
  ProgramExecutor& operator=(const ProgramExecutor&) = delete;

  // Runs the program once: iteration `step` (which picks its samples). An
  // error names the rank and the instruction; after one, the executor and
  // the communicator are unusable (peers may be blocked mid-step).
  absl::StatusOr<StepMetrics> RunStep(int64_t step);
  // An asynchronous schedule (Topology::repeating) leaves the last step's
  // backwards and updates to the next: after step `last_step`, the run's
  // last or one to checkpoint, this runs them (the drain), and the
  // parameters then hold the newest weights. Steps after a drain run as a
  // fresh run from those weights would. Nothing to do for a synchronous
  // schedule. Errors as RunStep's.
  absl::Status DrainPipeline(int64_t last_step);

  // Every parameter this worker holds, by its name in the whole model
  // ("layer3.qkv_weight"), in model-stage order. Under sharding full a
  // stage's parameters hold no memory between steps once it has run one:
  // read them only after GatherReleasedParameters.
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() const;
  // Sharding full: gathers every released stage's parameters whole again,
  // between steps. A collective of each stage's group: every member calls
  // it at the same point. The communicator's error when a gather fails.
  absl::Status GatherReleasedParameters();

  // The model stages this worker holds a replica of, ascending.
  std::vector<int> model_stages() const;
  const TaskSpec& spec() const { return spec_; }
  // A held model stage's parameters by name, in the stage's order (live
  // tensors). NOT_FOUND for a stage this worker does not hold.
  absl::StatusOr<std::vector<NamedTensor>> StageParameters(
      int model_stage) const;
  // A held model stage's state between steps; the tensors are the live ones,
  // not copies. NOT_FOUND for a stage this worker does not hold;
  // FAILED_PRECONDITION for a stage whose optimizer state is sharded (this
  // rank holds only its shard: ExportPart).
  absl::StatusOr<StageState> ExportStage(int model_stage) const;
  // What this rank saves of a held model stage between steps (StagePart).
  // NOT_FOUND for a stage this worker does not hold.
  absl::StatusOr<StagePart> ExportPart(int model_stage) const;
  // Overwrites a held model stage's parameters and optimizer state with
  // copies of `state`'s (the whole stage's; a sharded stage keeps its
  // shard of the moments), between steps. NOT_FOUND for a stage this worker
  // does not hold; INVALID_ARGUMENT naming the parameter whose value or
  // moments are missing or differ in shape or type (and then nothing has
  // changed).
  absl::Status ImportStage(int model_stage, const StageState& state);
  // Another thread reads the state ExportStage returned (a checkpoint being
  // written) until `read` is ready: the next OPTIMIZER_STEP or SHARD_STEP,
  // the only ops that change it, waits for that, while the ops before it go
  // on. The wait counts as bubble, not busy time.
  void DeferUpdatesUntil(std::shared_future<void> read);

  // Each step writes on `board` (null: on none) the index of each
  // instruction it begins, then the program's length as it finishes; the
  // board must outlive the executor. It is how the worker's daemon tells
  // where a hung rank is stuck.
  void PublishPositionTo(OpPositionBoard* board) { position_ = board; }

  // Whether this worker runs a replica of the model's last stage (and so
  // reports a loss).
  bool holds_last_stage() const { return holds_last_stage_; }

 private:
  ProgramExecutor(const schedule::RankSchedule& schedule, const TaskSpec& spec,
                  const DataSource& data, Communicator* comm);

  // How a micro-batch's backward on one replica runs: read off the
  // program's BACKWARD and BACKWARD_INPUT instructions.
  struct BackwardPlan {
    int num_parts = 1;
    bool recompute = false;
  };

  // A slice's graph, ready for its backward: the stage input (a leaf unless
  // token ids), the graph's end, and the gradient flowing into the end
  // (undefined on the model's last stage, whose end is the loss).
  struct BackwardGraph {
    at::Tensor input;
    at::Tensor end;
    at::Tensor end_gradient;
  };

  // Which instructions a run of the program executes: a step's (the first
  // step of a repeating program skips the ops on the previous step's
  // micro-batches, which have none), or the drain's (only those).
  enum class Pass { kStep, kDrain };
  absl::StatusOr<StepMetrics> RunPass(int64_t step, Pass pass);
  bool Skips(const schedule::Instruction& inst, Pass pass) const;
  // Executes `inst` (of the program as written), in this executor's step
  // `run_step` (0 for its first) and the job's step `step`; under an
  // asynchronous rule a compute op on the weight version its micro-batch
  // runs on.
  absl::Status RunOp(const schedule::Instruction& inst, int64_t run_step,
                     int64_t step, StepMetrics& metrics);
  // Asynchronous rules: the micro-batch compute op `inst` acts on, run in
  // this executor's step `run_step`.
  AsynchronousWeights::MicroBatchId MicroBatchOf(
      const schedule::Instruction& inst, int64_t run_step) const;

  absl::Status Build();
  // Asynchronous schedules: the update rules and options the runtime runs.
  absl::Status CheckAsynchronous() const;
  // The instructions against the held stages and the options, and each
  // slice's backward against the others; fills backward_plans_.
  absl::Status CheckProgram();
  absl::Status Execute(const schedule::Instruction& inst, int64_t step,
                       StepMetrics& metrics);
  absl::Status Forward(const schedule::Instruction& inst, int64_t step,
                       StepMetrics& metrics);
  absl::Status ForwardMicroBatch(schedule::StageRef ref, int micro_batch,
                                 int64_t step, StepMetrics& metrics);
  // What the stage's forward takes: the micro-batch's tokens on the first
  // stage, else the activation received for it.
  absl::StatusOr<at::Tensor> ForwardInput(schedule::StageRef ref, int micro_batch,
                                          const MicroBatch& batch);
  // The forward's output parts, joined, to the next stage: held here, or
  // waiting to be sent.
  void HandOnActivation(schedule::StageRef ref, int micro_batch,
                        std::vector<at::Tensor> parts);
  absl::Status Backward(const schedule::Instruction& inst);
  absl::Status BackwardInput(const schedule::Instruction& inst);
  // On the first stage, marks the token rows the backward of `stashed`
  // gives gradients to (used_token_rows_).
  void MarkBackpropagatedTokens(schedule::StageRef ref,
                                const StashedForward& stashed);
  absl::Status BackwardWeight(const schedule::Instruction& inst);
  // The graph of the stashed forward, recomputed when `inst` says so, with
  // the output gradient it takes from gradients_in_.
  absl::StatusOr<BackwardGraph> PrepareBackward(
      const schedule::Instruction& inst, StashedForward stashed);
  // Hands the gradient w.r.t. a slice's stage input to the local previous
  // stage, or to its SEND_GRAD.
  void RouteInputGradient(const SliceKey& key, at::Tensor gradient);
  absl::Status Send(const schedule::Instruction& inst, TransferKind kind);
  absl::Status Receive(const schedule::Instruction& inst, TransferKind kind,
                       StepMetrics& metrics);
  int ModelStageOf(const schedule::Instruction& inst) const;
  // The model stage's gradient bucket, held (allocated if it was not), with
  // the step's peak of held bucket bytes updated.
  const at::Tensor& HoldGradients(int model_stage);
  int64_t HeldGradientBytes() const;
  // A stage's gradient sum: an allreduce, or a reduce-scatter into this
  // rank's shard.
  absl::Status BeginGradientSum(const schedule::Instruction& inst);
  absl::Status EndGradientSum(const schedule::Instruction& inst,
                              StepMetrics& metrics);
  // The all-gather of a sharded stage's updated shards (sharding full: of
  // its parameters before a use).
  absl::Status BeginGather(const schedule::Instruction& inst);
  // Bytes of fully sharded stages' parameters gathered now.
  int64_t GatheredBytes() const;
  absl::Status EndGather(const schedule::Instruction& inst,
                         StepMetrics& metrics);
  // Waits for the sends and checks that nothing is left over, but the
  // stashed forwards of a repeating program's step, which the next step's
  // (or the drain's) backwards take.
  absl::Status FinishStep(Pass pass);
  // Restores a sharded stage's optimizers from the whole stage's `state`
  // (checked against `parameters`, the stage's): its shard of the bucketed
  // parameters' moments, and a tied embedding copy's whole.
  absl::Status RestoreShardedOptimizer(
      int model_stage, const std::vector<NamedTensor>& parameters,
      const OptimizerState& state);
  // Waits for the reader DeferUpdatesUntil named, if any, and forgets it.
  void WaitForPendingRead();
  // Fills the weights/gradients/optimizer/activations split of the peak.
  void AccountStateMemory(StepMetrics& metrics) const;

  absl::StatusOr<MicroBatch> LoadMicroBatch(int64_t step, int micro_batch);
  Stage& StageOf(schedule::StageRef ref);

  const schedule::Topology topology_;
  const schedule::WorkerProgram program_;
  const int rank_;
  const TaskSpec spec_;
  const DataSource& data_;
  Communicator* const comm_;
  const MessageTags tags_;
  // What a loss is divided by: W·N·B, the samples of one mini-batch, or
  // under PipeDream's rule B, one micro-batch's.
  const double loss_normaliser_;
  // The mini-batch's share of a step's summed losses: the reported loss is
  // their mean over the mini-batch's samples whatever loss_normaliser_ is.
  const double reported_loss_scale_;
  DeviceMemory memory_;

  // Under an asynchronous rule, the weight versions of each held stage.
  std::unique_ptr<AsynchronousWeights> asynchronous_weights_;
  // Steps begun since the start or the last drain (a drain begins none), and
  // whether micro-batches of a step are still in flight (a repeating program
  // between its steps).
  int64_t steps_begun_ = 0;
  bool pipeline_empty_ = true;

  std::set<schedule::StageRef> held_;
  std::map<int, std::shared_ptr<Stage>> stages_;  // by model stage
  // Each model stage's gradients as one buffer, by model stage: what its
  // sum sums in place.
  std::map<int, GradientBucket> gradient_buckets_;
  // The most bytes of gradient buckets held at once in this step, and of
  // fully sharded stages' parameters gathered at once.
  int64_t peak_gradient_bytes_ = 0;
  int64_t peak_gathered_bytes_ = 0;
  // Where this rank holds the first model stage: the token embedding rows
  // the backwards since the last update gave gradients to (NoRowsUsed), so
  // that its allreduce sums only those; undefined elsewhere. Marked by the
  // backwards, not the forwards: under an asynchronous rule an update falls
  // between a micro-batch's forward and its backward.
  at::Tensor used_token_rows_;
  // Each model stage's gradient group and this rank's place in it, for
  // stages held by more than one rank.
  std::map<int, GroupMember> group_members_;
  // One optimizer per model stage, so each stage's state can be saved and
  // restored on its own; OPTIMIZER_STEP steps them all. With sharding, a
  // stage held by a group steps its bucketed parameters in a
  // ShardedOptimizer (SHARD_STEP), and its optimizer holds a tied
  // embedding's copy alone.
  std::map<int, std::unique_ptr<Optimizer>> optimizers_;
  std::map<int, std::unique_ptr<ShardedOptimizer>> sharded_optimizers_;
  // Ranks of the job holding a copy of a tied embedding's weight, when the
  // model ties its embeddings across stages.
  const size_t tied_holders_;
  // Where this rank holds such a copy: their gradients' sum, and the indices
  // of the instructions after which it starts (one per update). Null and
  // empty elsewhere.
  std::unique_ptr<TiedEmbeddingSync> tied_sync_;
  std::set<size_t> tied_gradients_complete_;
  std::map<std::pair<schedule::StageRef, int>, BackwardPlan> backward_plans_;
  bool holds_last_stage_ = false;
  OpPositionBoard* position_ = nullptr;
  // The reader the next OPTIMIZER_STEP or SHARD_STEP waits for
  // (DeferUpdatesUntil), if any.
  std::shared_future<void> pending_read_;

  // Per-step state, empty between steps.
  ActivationStash stash_;
  // The step's loss so far, summed on the device: reading it back after
  // every micro-batch would stall a GPU's queue.
  at::Tensor loss_sum_;
  // Whole micro-batch inputs waiting for their FORWARD (part 0), output
  // gradients waiting for their BACKWARD part, and what waits for a send.
  std::map<SliceKey, at::Tensor> activations_in_;
  std::map<SliceKey, at::Tensor> activations_out_;
  std::map<SliceKey, at::Tensor> gradients_in_;
  std::map<SliceKey, at::Tensor> gradients_out_;
  std::vector<std::unique_ptr<PendingOp>> sends_;
  // A repeating program's sends of the step before, not yet waited for
  // (FinishStep).
  std::vector<std::unique_ptr<PendingOp>> carried_sends_;
  // By model stage, the gradient sums and the all-gathers in flight.
  std::map<int, std::unique_ptr<GradientAllReduce>> gradient_sums_;
  std::map<int, std::unique_ptr<PendingOp>> gathers_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_PROGRAM_EXECUTOR_H_
