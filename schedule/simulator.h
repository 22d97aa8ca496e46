// Predicts the timing of a (validated) schedule from op costs: makespan,
// per-worker busy/idle time and bubble ratio, peak stashed activations,
// exposed allreduce time and the critical path's forward/backward counts
// (C_f, C_b of the Chimera paper's eq. 1).
//
//   CostModel costs;                  // unit forward, backward 2x forward
//   costs.backward = 1;               // forward = backward, as in Fig. 3
//   ASSIGN_OR_RETURN(SimulationResult r, Simulate(schedule, costs));
//   r.bubble_ratio;                   // (D-2)/(2N+D-2) for Chimera, N = D
//
// Model: each worker runs its program in order. FORWARD costs `forward` per
// micro-batch; BACKWARD costs backward / num_parts, plus forward / num_parts
// with recomputation; BACKWARD_INPUT and BACKWARD_WEIGHT cost their own
// halves likewise. A micro-batch's activations count from its forward to
// its BACKWARD or BACKWARD_WEIGHT. A send is posted in `message_post` (none
// by default) and arrives alpha + beta * bytes later; a receive waits for
// the arrival, then takes `message_receive` (none by default), and a compute
// op after such a wait pays the wake-up cost.
// Where ranks share a node's cores, a compute op, a post and a receive run
// only while one of them is free (shared_cores.h: booked in the order ops are
// timed, a free stretch used however short), and where they share its caches
// and memory bus it runs longer for every other rank of the node computing
// meanwhile (found by timing the programs again until every op's stretch agrees
// with the overlaps it produces). A collective starts once every group member
// has begun it and each member's link is free (a worker holding several stages
// runs their collectives one after another, in the order their groups began
// them, as they share its network link) and overlaps compute; END waits for it
// (those waits are the exposed collective time). An allreduce takes
// Rabenseifner's 2 log2(r) alpha + 2 (r-1)/r beta bytes, a reduce-scatter and
// an all-gather half of that each. A worker's optimizer step costs the step of
// every model stage it holds and does not shard; a SHARD_STEP, its 1/r of its
// stage's.
//
// Definition used everywhere: makespan spans the first op start to the last
// op end across all workers; a worker's idle time is makespan - busy and its
// bubble ratio idle / makespan; the schedule's bubble ratio is the mean.
#ifndef CHIMERA_SCHEDULE_SIMULATOR_H_
#define CHIMERA_SCHEDULE_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"

namespace chimera::schedule {

struct CostModel {
  // Seconds (or any unit) per stage per micro-batch.
  double forward = 1.0;
  double backward = 2.0;
  // Optional per-model-stage overrides (size NumModelStages()); empty: the
  // scalars above for every stage.
  std::vector<double> stage_forward;
  std::vector<double> stage_backward;
  // The split backward's halves, BACKWARD_INPUT and BACKWARD_WEIGHT, with
  // their per-model-stage overrides; a negative value (the default) costs
  // each half at half the stage's backward.
  double backward_input = -1.0;
  double backward_weight = -1.0;
  std::vector<double> stage_backward_input;
  std::vector<double> stage_backward_weight;
  // p2p: alpha + beta * bytes, activation/gradient bytes per micro-batch.
  double p2p_alpha = 0.0;
  double p2p_beta = 0.0;
  double activation_bytes = 0.0;
  // Allreduce (Rabenseifner): gradient bytes per model stage.
  double allreduce_alpha = 0.0;
  double allreduce_beta = 0.0;
  double gradient_bytes = 0.0;
  // A worker's optimizer step: `optimizer_step`, plus per model stage it
  // holds (once, however many replicas of it) and does not shard
  // `stage_optimizer` where given (size NumModelStages()).
  double optimizer_step = 0.0;
  std::vector<double> stage_optimizer;
  // Optional per-model-stage SHARD_STEP seconds; empty: the stage's
  // `stage_optimizer` over the ranks holding it in the schedule.
  std::vector<double> stage_shard_step;
  // Optional: seconds for one p2p message of `bytes` from rank `from` to
  // rank `to`, where the link depends on where the ranks are placed. Unset:
  // p2p_alpha + p2p_beta * bytes for every pair.
  std::function<double(int from, int to, double bytes)> p2p_time;
  // Optional per-model-stage allreduce seconds (size NumModelStages()), for
  // groups the schedule does not show whole (data-parallel replicas left out
  // of the simulation, links chosen by placement). Empty: AllreduceTime over
  // the group's ranks. A stage that reduce-scatters its gradients instead
  // takes this for its reduce-scatter (empty: half of AllreduceTime).
  std::vector<double> stage_allreduce;
  // Likewise for a sharded stage's all-gather of its updated weights; empty:
  // half of AllreduceTime over the group's ranks.
  std::vector<double> stage_allgather;
  // Optional: ranks that share processors (CPU worker processes of one
  // node), as each rank's node; a node's ranks then compute at most
  // `cores_per_node` ops at a time. Empty or 0: every rank computes on its
  // own.
  std::vector<int> node_of_rank;
  int cores_per_node = 0;
  // With node_of_rank: a compute op (forward, backward, optimizer step) of
  // cost c takes c * (1 + co_running_slowdown * m), where m is how many
  // other ranks of its node compute, on average, while it runs. 0: ranks
  // compute independently.
  double co_running_slowdown = 0.0;
  // A compute op right after its rank waited for a message or an allreduce
  // takes min(cost, wake_up) longer: a process that slept computes its first
  // moments slowly. 0: no such loss.
  double wake_up = 0.0;
  // What posting a send or an allreduce's begin costs its rank (on a core,
  // where cores are shared) before the message leaves. 0: free.
  double message_post = 0.0;
  // What a message costs its receiving rank once it has arrived (on a core,
  // where cores are shared) before the receive completes. 0: free.
  double message_receive = 0.0;
};

// The share of a step a worker spent not computing, 0 for an empty step.
// Predictions and every measured figure (workers, coordinator, benchmarks)
// use this one definition, so they can be compared.
double BubbleRatio(double idle_seconds, double step_seconds);

// Rabenseifner's allreduce time for `ranks` ranks.
double AllreduceTime(const CostModel& costs, int ranks);

// Timing of one instruction.
struct InstructionTiming {
  double start = 0.0;
  double end = 0.0;
};

struct WorkerResult {
  int rank = 0;
  double busy = 0.0;
  double idle = 0.0;
  double bubble_ratio = 0.0;
  // Most micro-batches whose forward ran on this worker (per stage replica)
  // and whose backward (its weight half, when split) has not finished, at
  // any time.
  int peak_activations = 0;
  // Waiting at the ends of collectives: allreduces, reduce-scatters and
  // all-gathers.
  double exposed_allreduce = 0.0;
  // Parallel to the worker's instructions.
  std::vector<InstructionTiming> timings;
};

struct SimulationResult {
  double makespan = 0.0;
  double bubble_ratio = 0.0;
  double exposed_allreduce = 0.0;  // max over workers
  // Forward and backward ops on the critical path: the chain of
  // instructions, each bounded by its predecessor on the same worker or by
  // the send/allreduce member that released it, ending at the last op.
  int critical_forwards = 0;
  int critical_backwards = 0;
  std::vector<WorkerResult> workers;
};

// `schedule` should be validated; a deadlocking one returns its error, and
// a repeating one (step_unrolling.h) InvalidArgument.
absl::StatusOr<SimulationResult> Simulate(const Schedule& schedule,
                                          const CostModel& costs);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_SIMULATOR_H_
