#include "schedule/schedule_params.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "schedule/program.h"

namespace chimera::schedule {
namespace {

template <typename Enum, size_t kSize>
using NameTable = std::array<std::pair<Enum, absl::string_view>, kSize>;

constexpr NameTable<Scheme, 15> kSchemeNames = {{
    {Scheme::kGpipe, "gpipe"},
    {Scheme::kOneFOneB, "1f1b"},
    {Scheme::kGems, "gems"},
    {Scheme::kChimera, "chimera"},
    {Scheme::kMixPipe, "mixpipe"},
    {Scheme::kInterleaved, "interleaved"},
    {Scheme::kBreadthFirst, "breadth-first"},
    {Scheme::kZbH1, "zb-h1"},
    {Scheme::kZbH2, "zb-h2"},
    {Scheme::kZbAuto, "zb-auto"},
    {Scheme::kZbV, "zbv"},
    {Scheme::kDualPipeV, "dualpipev"},
    {Scheme::kChimeraZb, "chimera-zb"},
    {Scheme::kPipeDream, "pipedream"},
    {Scheme::kPipeDream2Bw, "pipedream-2bw"},
}};
constexpr NameTable<Concat, 3> kConcatNames = {{
    {Concat::kDirect, "direct"},
    {Concat::kForwardDoubling, "forward-doubling"},
    {Concat::kBackwardHalving, "backward-halving"},
}};
constexpr NameTable<WarmupPolicy, 2> kPolicyNames = {{
    {WarmupPolicy::kPa, "pa"},
    {WarmupPolicy::kPb, "pb"},
}};
constexpr NameTable<Sync, 3> kSyncNames = {{
    {Sync::kEager, "eager"},
    {Sync::kEagerAll, "eager-all"},
    {Sync::kEnd, "end"},
}};
constexpr NameTable<Sharding, 4> kShardingNames = {{
    {Sharding::kNone, "none"},
    {Sharding::kOptimizer, "optimizer"},
    {Sharding::kGradientsAndOptimizer, "gradients-and-optimizer"},
    {Sharding::kFull, "full"},
}};

// The job-file field and flag of each parameter that is not a knob.
struct ParamNames {
  ScheduleParam param;
  absl::string_view field;
  absl::string_view flag;
};
constexpr ParamNames kCoreParamNames[] = {
    {ScheduleParam::kScheme, "schedule", "scheme"},
    {ScheduleParam::kDepth, "pipeline", "depth"},
    {ScheduleParam::kMicroBatches, "microBatches", "micro-batches"},
    {ScheduleParam::kWidth, "data", "width"},
    {ScheduleParam::kRecompute, "recompute", "recompute"},
    // Derived from op costs, never set by a job file.
    {ScheduleParam::kBackwardSlots, "", "backward-slots"},
};

ParamNames NamesOf(ScheduleParam param) {
  if (const Knob* knob = KnobOf(param)) return {param, knob->field, knob->flag};
  for (const ParamNames& names : kCoreParamNames) {
    if (names.param == param) return names;
  }
  return kCoreParamNames[0];  // Unreachable: every parameter is named.
}

template <typename Enum, size_t kSize>
std::string AllNames(const NameTable<Enum, kSize>& table) {
  return absl::StrJoin(table, ", ", [](std::string* out, const auto& entry) {
    out->append(entry.second.data(), entry.second.size());
  });
}

template <typename Enum, size_t kSize>
absl::StatusOr<Enum> ParseName(const NameTable<Enum, kSize>& table,
                               absl::string_view what,
                               absl::string_view name) {
  for (const auto& [value, entry_name] : table) {
    if (entry_name == name) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a ", what,
                                                 "; use one of ",
                                                 AllNames(table)));
}

template <typename Enum, size_t kSize>
std::string NameOf(const NameTable<Enum, kSize>& table, Enum value) {
  for (const auto& [entry_value, name] : table) {
    if (entry_value == value) return std::string(name);
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<Scheme> ParseScheme(absl::string_view name) {
  return ParseName(kSchemeNames, "schedule", name);
}
absl::StatusOr<Concat> ParseConcat(absl::string_view name) {
  return ParseName(kConcatNames, "concatenation method", name);
}
absl::StatusOr<WarmupPolicy> ParseWarmupPolicy(absl::string_view name) {
  return ParseName(kPolicyNames, "warm-up policy", name);
}
absl::StatusOr<Sync> ParseSync(absl::string_view name) {
  return ParseName(kSyncNames, "sync mode", name);
}
absl::StatusOr<Sharding> ParseSharding(absl::string_view name) {
  return ParseName(kShardingNames, "sharding mode", name);
}
absl::StatusOr<std::vector<int>> ParseReplication(absl::string_view text) {
  std::vector<int> replication;
  for (absl::string_view entry : absl::StrSplit(text, ':')) {
    int replicas = 0;
    if (!absl::SimpleAtoi(entry, &replicas) || replicas < 1 ||
        replicas > kMaxScheduleSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "' is not a replication: '", entry,
          "' must be a number of workers in [1, ", kMaxScheduleSize,
          "], one per stage separated by ':' (e.g. 2:1)"));
    }
    replication.push_back(replicas);
  }
  const std::string problem =
      ReplicationProblem(replication, static_cast<int>(replication.size()));
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replication '", text, "' ", problem));
  }
  return replication;
}
std::string SchemeName(Scheme scheme) { return NameOf(kSchemeNames, scheme); }
std::string ConcatName(Concat concat) { return NameOf(kConcatNames, concat); }
std::string WarmupPolicyName(WarmupPolicy policy) {
  return NameOf(kPolicyNames, policy);
}
std::string SyncName(Sync sync) { return NameOf(kSyncNames, sync); }
std::string ShardingName(Sharding sharding) {
  return NameOf(kShardingNames, sharding);
}
std::string ReplicationName(const std::vector<int>& replication) {
  return absl::StrJoin(replication, ":");
}
absl::StatusOr<int> SliceSize(int micro_batch_size,
                              const std::vector<int>& replication) {
  const int slices = SlicesPerMicroBatch(replication);
  if (micro_batch_size % slices != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(micro_batch_size, " does not split into the ", slices,
                     " slices of replication ", ReplicationName(replication),
                     " (a multiple of ", slices, " does)"));
  }
  return micro_batch_size / slices;
}
std::string SchemeNames() { return AllNames(kSchemeNames); }
std::string ConcatNames() { return AllNames(kConcatNames); }
std::string WarmupPolicyNames() { return AllNames(kPolicyNames); }
std::string SyncNames() { return AllNames(kSyncNames); }
std::string ShardingNames() { return AllNames(kShardingNames); }

std::string ScheduleParamField(ScheduleParam param) {
  return std::string(NamesOf(param).field);
}
std::string ScheduleParamName(ScheduleParam param) {
  return std::string(NamesOf(param).flag);
}

const Knob* KnobOf(ScheduleParam param) {
  for (const Knob& knob : kKnobs) {
    if (knob.param == param) return &knob;
  }
  return nullptr;
}

bool KnobApplies(ScheduleParam param, Scheme scheme) {
  const Knob* knob = KnobOf(param);
  return knob == nullptr || (knob->schemes & SchemesOf({scheme})) != 0;
}

std::string SchemesReading(ScheduleParam param) {
  std::vector<absl::string_view> names;
  for (const auto& [scheme, name] : kSchemeNames) {
    if (KnobApplies(param, scheme)) names.push_back(name);
  }
  if (names.size() == kSchemeNames.size()) return "every schedule";
  return absl::StrJoin(names, " or ");
}

// A named knob's KnobNames: its member, how names parse and print, and its
// name table.
template <typename Enum, Enum ScheduleParams::*kMember,
          absl::StatusOr<Enum> (*kParse)(absl::string_view),
          std::string (*kName)(Enum), std::string (*kNames)()>
constexpr KnobNames NamedMember() {
  return {
      [](absl::string_view name, ScheduleParams& params) -> absl::Status {
        absl::StatusOr<Enum> value = kParse(name);
        if (!value.ok()) return value.status();
        params.*kMember = *value;
        return absl::OkStatus();
      },
      [](const ScheduleParams& params) { return kName(params.*kMember); },
      kNames,
  };
}

const KnobNames kConcatKnob =
    NamedMember<Concat, &ScheduleParams::concat, ParseConcat, ConcatName,
                ConcatNames>();
const KnobNames kPolicyKnob =
    NamedMember<WarmupPolicy, &ScheduleParams::policy, ParseWarmupPolicy,
                WarmupPolicyName, WarmupPolicyNames>();
const KnobNames kSyncKnob =
    NamedMember<Sync, &ScheduleParams::sync, ParseSync, SyncName, SyncNames>();
const KnobNames kShardingKnob =
    NamedMember<Sharding, &ScheduleParams::sharding, ParseSharding,
                ShardingName, ShardingNames>();
const KnobNames kReplicationKnob = {
    [](absl::string_view text, ScheduleParams& params) -> absl::Status {
      absl::StatusOr<std::vector<int>> replication = ParseReplication(text);
      if (!replication.ok()) return replication.status();
      params.replication = *std::move(replication);
      return absl::OkStatus();
    },
    [](const ScheduleParams& params) {
      return ReplicationName(params.replication);
    },
    [] {
      return std::string(
          "workers per stage separated by ':', one entry per stage (2:1 "
          "runs stage 0 on two workers and stage 1 on one)");
    },
};

namespace {

// Sizes every scheme needs before its own rules can be checked.
std::vector<ScheduleParamError> SizeErrors(const ScheduleParams& params) {
  std::vector<ScheduleParamError> errors;
  const int d = params.depth;
  if (d < 1) {
    errors.push_back({ScheduleParam::kDepth, absl::StrCat(d, " must be >= 1")});
  }
  if (params.micro_batches < 1) {
    errors.push_back({ScheduleParam::kMicroBatches,
                      absl::StrCat(params.micro_batches, " must be >= 1")});
  }
  if (params.width < 1) {
    errors.push_back(
        {ScheduleParam::kWidth, absl::StrCat(params.width, " must be >= 1")});
  }
  // Derived ones too: a global batch of a billion makes a billion
  // micro-batches of one sample.
  for (const auto& [param, value] :
       {std::pair{ScheduleParam::kDepth, d},
        std::pair{ScheduleParam::kMicroBatches, params.micro_batches},
        std::pair{ScheduleParam::kWidth, params.width},
        std::pair{ScheduleParam::kChunks, params.chunks},
        std::pair{ScheduleParam::kActivationLimit, params.activation_limit}}) {
    if (value > kMaxScheduleSize) {
      errors.push_back({param, absl::StrCat(value, " must be <= ", kMaxScheduleSize)});
    }
  }
  if (params.activation_limit < 0) {
    errors.push_back({ScheduleParam::kActivationLimit,
                      absl::StrCat(params.activation_limit,
                                   " must be >= 0 (0: no limit)")});
  }
  if (params.backward_slots < 1 || params.backward_slots > 8) {
    errors.push_back(
        {ScheduleParam::kBackwardSlots,
         absl::StrCat(params.backward_slots, " must be in [1, 8]")});
  }
  return errors;
}

void AddChimeraErrors(const ScheduleParams& params,
                      std::vector<ScheduleParamError>& errors) {
  const int d = params.depth;
  if (params.pipelines < 2 || params.pipelines % 2 != 0) {
    errors.push_back({ScheduleParam::kPipelines,
                      absl::StrCat(params.pipelines,
                                   " must be an even number >= 2 (f down and "
                                   "f up pipelines)")});
  } else if ((d / 2) % (params.pipelines / 2) != 0) {
    errors.push_back({ScheduleParam::kPipelines,
                      absl::StrCat(params.pipelines,
                                   " pipelines need f = ", params.pipelines / 2,
                                   " to divide D/2 = ", d / 2)});
  }
}

void AddMixPipeErrors(const ScheduleParams& params,
                      std::vector<ScheduleParamError>& errors) {
  const int d = params.depth;
  const int k = params.mixpipe_k;
  const bool k_maximizing = k == 2 * (d - 1) && params.micro_batches > d;
  if (!k_maximizing && (k < 2 || k > d || k % 2 != 0)) {
    errors.push_back({ScheduleParam::kMixPipeK,
                      absl::StrCat(k, " must be even in [2, D = ", d,
                                   "], or 2(D-1) = ", 2 * (d - 1),
                                   " when micro-batches exceed D")});
  }
  // MixPipe eq. 5: Gamma in [1, (D-K)/2], 0 being plain 1F1B. Each early
  // forward stands in for one of the bubbles a smaller K adds, so there
  // are none to advance at K >= D (Chimera, K-maximizing).
  const int max_gamma = std::max(0, (d - k) / 2);
  if (params.mixpipe_gamma < 0 || params.mixpipe_gamma > max_gamma) {
    errors.push_back({ScheduleParam::kMixPipeGamma,
                      absl::StrCat(params.mixpipe_gamma,
                                   " must be in [0, (D-K)/2 = ", max_gamma,
                                   "] for D = ", d, ", K = ", k)});
  }
}

void AddLoopingErrors(const ScheduleParams& params,
                      std::vector<ScheduleParamError>& errors) {
  if (params.chunks < 1) {
    errors.push_back(
        {ScheduleParam::kChunks, absl::StrCat(params.chunks, " must be >= 1")});
  }
  if (params.scheme == Scheme::kInterleaved &&
      params.micro_batches % params.depth != 0) {
    errors.push_back(
        {ScheduleParam::kMicroBatches,
         absl::StrCat(params.micro_batches, " must be a multiple of the depth ",
                      params.depth, " for interleaved (depth-first) looping")});
  }
}

// The repeating step holds the backwards of the previous step's last
// micro-batches (up to D of them): with fewer than D micro-batches a step
// would reach two steps back. Updates step whole weight versions, so
// nothing is sharded.
void AddAsynchronousErrors(const ScheduleParams& params,
                           std::vector<ScheduleParamError>& errors) {
  if (params.micro_batches < params.depth) {
    errors.push_back(
        {ScheduleParam::kMicroBatches,
         absl::StrCat(params.micro_batches, " must be at least the depth ",
                      params.depth, " for ", SchemeName(params.scheme),
                      " (a step overlaps only the step before it)")});
  }
  if (params.sharding != Sharding::kNone) {
    errors.push_back(
        {ScheduleParam::kSharding,
         absl::StrCat(ShardingName(params.sharding), ": ",
                      SchemeName(params.scheme),
                      " shards nothing: each update writes a whole weight "
                      "version (set sharding none)")});
  }
}

// A replicated stage's replicas each run a slice of every micro-batch: as
// many slices as the least common multiple of the stages' replicas.
void AddReplicationErrors(const ScheduleParams& params,
                          std::vector<ScheduleParamError>& errors) {
  const std::string problem =
      ReplicationProblem(params.replication, params.depth);
  if (!problem.empty()) {
    errors.push_back(
        {ScheduleParam::kReplication,
         absl::StrCat(ReplicationName(params.replication), " ", problem)});
  }
}

}  // namespace

std::vector<ScheduleParamError> ValidateScheduleParams(
    const ScheduleParams& params) {
  std::vector<ScheduleParamError> errors = SizeErrors(params);
  if (!errors.empty()) return errors;

  const int d = params.depth;
  const bool pairs_stages = params.scheme == Scheme::kChimera ||
                            params.scheme == Scheme::kChimeraZb ||
                            params.scheme == Scheme::kMixPipe;
  if (pairs_stages && d % 2 != 0) {
    errors.push_back(
        {ScheduleParam::kDepth,
         absl::StrCat(d, " must be even for ", SchemeName(params.scheme),
                      " (the down and up pipelines pair stage i with stage "
                      "D-1-i)")});
    return errors;
  }
  if (KnobApplies(ScheduleParam::kPipelines, params.scheme)) {
    AddChimeraErrors(params, errors);
  }
  if (params.scheme == Scheme::kMixPipe) AddMixPipeErrors(params, errors);
  if (IsLooping(params.scheme)) AddLoopingErrors(params, errors);
  // A stage held by one rank has no group to shard over (a replication's
  // stages on two or more workers shard; its others do not).
  const bool replicates =
      std::any_of(params.replication.begin(), params.replication.end(),
                  [](int replicas) { return replicas > 1; });
  if (params.sharding != Sharding::kNone && params.width == 1 &&
      !IsBidirectional(params.scheme) && !replicates &&
      !IsAsynchronous(params.scheme)) {
    errors.push_back(
        {ScheduleParam::kSharding,
         absl::StrCat(ShardingName(params.sharding),
                      " needs gradient groups of two or more workers, and "
                      "at data width 1 ",
                      SchemeName(params.scheme),
                      " holds every stage on one worker: set a width above "
                      "1, use a bidirectional schedule (chimera, chimera-zb, "
                      "gems, mixpipe), replicate a stage or use sharding "
                      "none")});
  }
  if (IsAsynchronous(params.scheme)) AddAsynchronousErrors(params, errors);
  if (!params.replication.empty()) {
    if (KnobApplies(ScheduleParam::kReplication, params.scheme)) {
      AddReplicationErrors(params, errors);
    } else {
      errors.push_back(
          {ScheduleParam::kReplication,
           absl::StrCat("applies to ",
                        SchemesReading(ScheduleParam::kReplication), ", not ",
                        SchemeName(params.scheme))});
    }
  }
  // DualPipeV's steady phase runs N - 2D + r + 1 rounds on position r.
  if (params.scheme == Scheme::kDualPipeV && params.micro_batches < 2 * d) {
    errors.push_back(
        {ScheduleParam::kMicroBatches,
         absl::StrCat(params.micro_batches, " must be at least 2D = ", 2 * d,
                      " for dualpipev (its order needs 2 micro-batches per "
                      "worker in flight before the steady phase)")});
  }
  return errors;
}

std::string DescribeScheduleParamErrors(
    const std::vector<ScheduleParamError>& errors, const ParamNamer& name) {
  return absl::StrJoin(errors, "; ",
                       [&name](std::string* out, const ScheduleParamError& e) {
                         absl::StrAppend(out, name(e.param), ": ", e.message);
                       });
}

bool IsBidirectional(Scheme scheme) {
  return scheme == Scheme::kChimera || scheme == Scheme::kChimeraZb ||
         scheme == Scheme::kGems || scheme == Scheme::kMixPipe;
}

bool IsAsynchronous(Scheme scheme) {
  return scheme == Scheme::kPipeDream || scheme == Scheme::kPipeDream2Bw;
}

bool IsLooping(Scheme scheme) {
  return scheme == Scheme::kInterleaved || scheme == Scheme::kBreadthFirst;
}

bool SplitsBackward(Scheme scheme) {
  return scheme == Scheme::kZbH1 || scheme == Scheme::kZbH2 ||
         scheme == Scheme::kZbAuto || IsVShaped(scheme) ||
         scheme == Scheme::kChimeraZb;
}

std::string SplitBackwardSchemeNames() {
  std::vector<absl::string_view> names;
  for (const auto& [scheme, name] : kSchemeNames) {
    if (SplitsBackward(scheme)) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

int ChunksPerWorker(const ScheduleParams& params) {
  if (IsLooping(params.scheme)) return params.chunks;
  return IsVShaped(params.scheme) ? 2 : 1;
}

int ModelStageCount(const ScheduleParams& params) {
  return params.depth * ChunksPerWorker(params);
}

bool IsVShaped(Scheme scheme) {
  return scheme == Scheme::kZbV || scheme == Scheme::kDualPipeV;
}

int WorkerCount(const ScheduleParams& params) {
  return params.width * WorkersPerPipeline(params.depth, params.replication);
}

}  // namespace chimera::schedule
