// ScheduleParams: the parameters that pick one pipeline schedule (scheme,
// depth, micro-batches, and each scheme's own knobs), their names as users
// write them, and the rules that make a parameter set valid.
//
// The same rules serve the job-file validator (paths like
// "spec.parallelism.pipeline") and `chimera schedule` (flags like --depth):
// ValidateScheduleParams reports each problem against a ScheduleParam and the
// caller names that parameter in its own vocabulary.
//
//   ASSIGN_OR_RETURN(Scheme scheme, ParseScheme("chimera"));
//   ScheduleParams params{.scheme = scheme, .depth = 4, .micro_batches = 4};
//   for (const ScheduleParamError& e : ValidateScheduleParams(params)) ...
#ifndef CHIMERA_SCHEDULE_SCHEDULE_PARAMS_H_
#define CHIMERA_SCHEDULE_SCHEDULE_PARAMS_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "schedule/program.h"

namespace chimera::schedule {

enum class Scheme {
  kGpipe,
  kOneFOneB,
  kGems,
  kChimera,
  kMixPipe,
  kInterleaved,
  kBreadthFirst,
  kZbH1,
  kZbH2,
  kZbAuto,
  kZbV,
  kDualPipeV,
  kChimeraZb,
  // Asynchronous: no flush, so weights are stale (IsAsynchronous).
  kPipeDream,
  kPipeDream2Bw,
};

// How Chimera joins basic units when there are more micro-batches than
// stages (Chimera paper, section 3.5).
enum class Concat { kDirect, kForwardDoubling, kBackwardHalving };

// DAPPLE warm-up policy: PA admits min(D-i, N) forwards on stage i before
// its first backward, PB min(2(D-i)-1, N).
enum class WarmupPolicy { kPa, kPb };

// When gradient allreduce starts: eagerly after a stage's last backward
// where a bubble follows, eagerly after every stage's last backward, or at
// the end of local compute.
enum class Sync { kEager, kEagerAll, kEnd };

// What the members of each gradient group (the ranks holding one model
// stage) shard among themselves, the breadth-first pipeline paper's sharded
// data parallelism: nothing; the optimizer's state (ZeRO-1: the gradients
// are allreduced, each member steps its shard of the stage's parameters and
// gathers the others'); or the gradients' sum too (the paper's DP_PS: the
// gradients are reduce-scattered instead, each member summing its shard); or
// the parameters as well (the paper's DP_FS: between uses each member keeps
// only its shard of them, and gathers them whole before each use).
enum class Sharding { kNone, kOptimizer, kGradientsAndOptimizer, kFull };

struct ScheduleParams {
  Scheme scheme = Scheme::kOneFOneB;
  // Pipeline depth D (stages per pipeline).
  int depth = 1;
  // Micro-batches N per pipeline replica per iteration.
  int micro_batches = 1;
  // Data-parallel width W.
  int width = 1;
  // chimera: pipelines 2f (even).
  int pipelines = 2;
  Concat concat = Concat::kDirect;
  WarmupPolicy policy = WarmupPolicy::kPa;
  Sync sync = Sync::kEager;
  // mixpipe: micro-batches injected before the first backward (K) and early
  // forwards (Gamma).
  int mixpipe_k = 2;
  int mixpipe_gamma = 0;
  // interleaved, breadth-first: model chunks per worker (v).
  int chunks = 1;
  // zb-auto: micro-batches whose activations a worker may hold at once (0:
  // no limit).
  int activation_limit = 0;
  Sharding sharding = Sharding::kNone;
  // gpipe, 1f1b: DAPPLE's stage replication, the ranks each stage runs on
  // per data-parallel replica, one entry per stage ("2:1"); empty: one each.
  std::vector<int> replication;
  bool recompute = false;
  // Grid slots a backward occupies while generators order the ops (a
  // forward takes one): 2 orders for backward = 2x forward, 1 for the
  // papers' forward = backward figures. Timing comes from the simulator.
  int backward_slots = 2;
};

// Names as they appear in job files and on the command line.
absl::StatusOr<Scheme> ParseScheme(absl::string_view name);
absl::StatusOr<Concat> ParseConcat(absl::string_view name);
absl::StatusOr<WarmupPolicy> ParseWarmupPolicy(absl::string_view name);
absl::StatusOr<Sync> ParseSync(absl::string_view name);
absl::StatusOr<Sharding> ParseSharding(absl::string_view name);
// "2:1" -> {2, 1}; every entry an integer in [1, kMaxScheduleSize], and
// one that ReplicationProblem (program.h) accepts for its own depth.
absl::StatusOr<std::vector<int>> ParseReplication(absl::string_view text);
std::string SchemeName(Scheme scheme);
std::string ConcatName(Concat concat);
std::string WarmupPolicyName(WarmupPolicy policy);
std::string SyncName(Sync sync);
std::string ShardingName(Sharding sharding);
// {2, 1} -> "2:1"; {} -> "".
std::string ReplicationName(const std::vector<int>& replication);
// The samples in each slice of a micro-batch of `micro_batch_size` that
// `replication` cuts into SlicesPerMicroBatch(replication) slices (the whole
// micro-batch without one). InvalidArgument when they do not divide it:
// "6 does not split into the 4 slices of replication 1:4 (a multiple of 4
// does)", for the caller to name the field.
absl::StatusOr<int> SliceSize(int micro_batch_size,
                              const std::vector<int>& replication);

// Comma-separated allowed names, for error messages and --help.
std::string SchemeNames();
std::string ConcatNames();
std::string WarmupPolicyNames();
std::string SyncNames();
std::string ShardingNames();

// One parameter of ScheduleParams: what a validation problem is about, and
// what a job file or a flag sets.
enum class ScheduleParam {
  kScheme,
  kDepth,
  kMicroBatches,
  kWidth,
  kPipelines,
  kConcat,
  kPolicy,
  kSync,
  kMixPipeK,
  kMixPipeGamma,
  kChunks,
  kActivationLimit,
  kSharding,
  kReplication,
  kRecompute,
  kBackwardSlots,
};

// Its name in a job's spec.parallelism ("pipeline", "microBatches", ...;
// "recompute" lives in spec.training), and as a `chimera schedule` flag
// without the dashes ("depth", "micro-batches", ...).
std::string ScheduleParamField(ScheduleParam param);
std::string ScheduleParamName(ScheduleParam param);

// The schemes a knob applies to, as bits (1 << Scheme).
using SchemeSet = uint32_t;
constexpr SchemeSet kEveryScheme = ~SchemeSet{0};
constexpr SchemeSet SchemesOf(std::initializer_list<Scheme> schemes) {
  SchemeSet set = 0;
  for (Scheme scheme : schemes) set |= SchemeSet{1} << static_cast<int>(scheme);
  return set;
}

// How a knob set by name ("pb") reads a name into its member of
// ScheduleParams, names the member's value, and lists the names it accepts.
struct KnobNames {
  absl::Status (*parse)(absl::string_view name, ScheduleParams& params);
  std::string (*name)(const ScheduleParams& params);
  std::string (*names)();
};
extern const KnobNames kConcatKnob;
extern const KnobNames kPolicyKnob;
extern const KnobNames kSyncKnob;
extern const KnobNames kShardingKnob;
extern const KnobNames kReplicationKnob;

// A knob: a parameter a job may set in spec.parallelism.<field>, that
// `chimera schedule` sets with --<flag>, and that a Plan carries in its field
// of the same name. The translations between them (params_proto.h) and the
// flags are driven by kKnobs, so a new knob is its member of ScheduleParams,
// its ScheduleParam, a row below, its field in ParallelismSpec and Plan, and
// the generator that reads it.
struct Knob {
  ScheduleParam param;
  absl::string_view field;
  absl::string_view flag;
  // --help text; a named knob's accepted names follow it.
  absl::string_view help;
  // The schemes that read it; setting it for another scheme is an error,
  // never silently ignored.
  SchemeSet schemes;
  // An integer knob: its member, and the least value a spec may give (the
  // scheme's own rules follow in ValidateScheduleParams).
  int ScheduleParams::*number;
  int least;
  // A knob set by name instead.
  const KnobNames* names;
};
inline constexpr Knob kKnobs[] = {
    {ScheduleParam::kPipelines, "pipelines", "pipelines",
     "chimera, chimera-zb: pipelines 2f (f divides D/2)",
     SchemesOf({Scheme::kChimera, Scheme::kChimeraZb}),
     &ScheduleParams::pipelines, 1, nullptr},
    {ScheduleParam::kConcat, "concat", "concat", "chimera, N > D",
     SchemesOf({Scheme::kChimera}), nullptr, 0, &kConcatKnob},
    {ScheduleParam::kPolicy, "policy", "policy", "1f1b warm-up policy",
     SchemesOf({Scheme::kOneFOneB}), nullptr, 0, &kPolicyKnob},
    {ScheduleParam::kSync, "sync", "sync", "Gradient allreduce start",
     kEveryScheme, nullptr, 0, &kSyncKnob},
    {ScheduleParam::kMixPipeK, "mixpipeK", "mixpipe-k",
     "mixpipe: micro-batches injected before the first backward",
     SchemesOf({Scheme::kMixPipe}), &ScheduleParams::mixpipe_k, 1, nullptr},
    {ScheduleParam::kMixPipeGamma, "mixpipeGamma", "mixpipe-gamma",
     "mixpipe: early forwards (2F1B)", SchemesOf({Scheme::kMixPipe}),
     &ScheduleParams::mixpipe_gamma, 0, nullptr},
    {ScheduleParam::kChunks, "chunks", "chunks",
     "interleaved, breadth-first: chunks v per worker",
     SchemesOf({Scheme::kInterleaved, Scheme::kBreadthFirst}),
     &ScheduleParams::chunks, 1, nullptr},
    {ScheduleParam::kActivationLimit, "activationLimit", "activation-limit",
     "zb-auto: micro-batches a worker may hold at once (0: no limit)",
     SchemesOf({Scheme::kZbAuto}), &ScheduleParams::activation_limit, 0,
     nullptr},
    {ScheduleParam::kSharding, "sharding", "sharding",
     "What each gradient group shards (needs groups of 2 or more: W > 1, a "
     "bidirectional schedule or a replicated stage; not asynchronous ones)",
     kEveryScheme, nullptr, 0, &kShardingKnob},
    {ScheduleParam::kReplication, "replication", "replication",
     "gpipe, 1f1b: DAPPLE's stage replication, the workers each stage runs "
     "on per pipeline, each on its slice of every micro-batch",
     SchemesOf({Scheme::kGpipe, Scheme::kOneFOneB}), nullptr, 0,
     &kReplicationKnob},
};

// The knob row of `param`, or null for the sizes, scheme and recompute.
const Knob* KnobOf(ScheduleParam param);
// Whether `scheme` reads `param`; true for every parameter but the knobs
// of kKnobs that name other schemes.
bool KnobApplies(ScheduleParam param, Scheme scheme);
// The schemes that read `param`, for messages: "chimera",
// "interleaved or breadth-first".
std::string SchemesReading(ScheduleParam param);

struct ScheduleParamError {
  ScheduleParam param;
  // The value and what is allowed, e.g. "3 must be even for chimera".
  std::string message;
};

// Every problem with `params`; empty when they describe a valid schedule.
std::vector<ScheduleParamError> ValidateScheduleParams(
    const ScheduleParams& params);

// How a message names a parameter: its flag without dashes by default,
// "--depth" for `chimera schedule`, "spec.parallelism.pipeline" for a job
// file (params_proto.h).
using ParamNamer = std::function<std::string(ScheduleParam)>;

// "depth: 3 must be even ...; pipelines: ...": the errors on one line, each
// parameter named by `name`.
std::string DescribeScheduleParamErrors(
    const std::vector<ScheduleParamError>& errors,
    const ParamNamer& name = ScheduleParamName);

// Schemes whose stage s also runs, in the opposite direction, on the worker
// of stage D-1-s: Chimera (with or without the split), GEMS, MixPipe.
bool IsBidirectional(Scheme scheme);
// Looping placements with v model chunks per worker: interleaved and
// breadth-first.
bool IsLooping(Scheme scheme);
// PipeDream and PipeDream-2BW: pipelines without a flush, whose
// micro-batches run on weights a few updates old. They do not compute what
// mini-batch SGD computes; every place that offers them says so.
bool IsAsynchronous(Scheme scheme);
// Schemes whose backwards are split into BACKWARD_INPUT and BACKWARD_WEIGHT
// (dualpipev: some of them); and their names, comma-separated.
bool SplitsBackward(Scheme scheme);
std::string SplitBackwardSchemeNames();

// The model stages each worker holds a slice of: v for the looping schemes,
// 2 for the V's (zbv, dualpipev), 1 for the others (Chimera's replicas are copies of one).
int ChunksPerWorker(const ScheduleParams& params);
// The model stages a schedule partitions the model into: D x that.
int ModelStageCount(const ScheduleParams& params);
// zbv and dualpipev: 2D model stages in a V, stages 0..D-1 down positions
// 0..D-1 and stages D..2D-1 back up from D-1 to 0.
bool IsVShaped(Scheme scheme);

// Number of worker ranks a schedule occupies: W x D, or W x the sum of the
// replication.
int WorkerCount(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_SCHEDULE_PARAMS_H_
