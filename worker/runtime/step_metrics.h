// What one worker measured in one iteration of its program: a plain struct
// that the standalone printer, the daemon's /metrics and reports to the
// coordinator all read.
//
//   ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
//   double bubble = schedule::BubbleRatio(metrics.bubble_seconds, metrics.step_seconds);
#ifndef CHIMERA_WORKER_RUNTIME_STEP_METRICS_H_
#define CHIMERA_WORKER_RUNTIME_STEP_METRICS_H_

#include <cstdint>
#include <vector>

#include "schedule/program.h"

namespace chimera::worker {

// Seconds of a step's instructions by the kind of work they do.
struct SecondsByOp {
  double forward = 0;
  double backward = 0;   // BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT
  double send = 0;       // SEND_ACT, SEND_GRAD
  double recv = 0;       // RECV_ACT, RECV_GRAD
  // The gradient groups' collectives, begun and ended: ALLREDUCE,
  // REDUCE_SCATTER, ALLGATHER.
  double allreduce = 0;
  double optimizer = 0;  // OPTIMIZER_STEP, SHARD_STEP

  void Add(schedule::OpKind op, double seconds);
};

struct StepMetrics {
  int64_t step = 0;
  // Wall time of the whole iteration.
  double step_seconds = 0;
  // FORWARD, BACKWARD (fused or split), OPTIMIZER_STEP and SHARD_STEP time.
  double busy_seconds = 0;
  // step_seconds - busy_seconds: waiting, communicating, idle.
  double bubble_seconds = 0;
  // Time spent in RECV_ACT / RECV_GRAD waiting for the data to arrive.
  double recv_wait_seconds = 0;
  // Time the collectives' ENDs waited for what compute did not hide.
  double allreduce_wait_seconds = 0;
  // Seconds of each instruction of the program, in program order, and
  // summed by kind.
  std::vector<double> op_seconds;
  SecondsByOp seconds_by_op;
  // CPU time of each instruction on the thread that ran it, in program
  // order: with one compute thread, an op's work without the time it waited
  // for a core where ranks outnumber the cores (bench/throughput_benchmark
  // costs the schedule's bound by it).
  std::vector<double> op_cpu_seconds;
  // When each instruction began, in seconds after the step began (so it
  // ended op_seconds[i] later), and when the step began as Unix time in
  // seconds: the system clock, so that ranks in different processes line up.
  std::vector<double> op_start_seconds;
  double start_unix_seconds = 0;

  // Sum of the losses of the micro-batches whose last stage this worker
  // ran (each normalised by the whole mini-batch, so the sum over all such
  // workers is the mini-batch's mean loss); 0 when has_loss is false.
  bool has_loss = false;
  double loss = 0;
  // Samples and tokens those micro-batches held: summed over workers, the
  // job's throughput without double counting.
  int64_t samples = 0;
  int64_t tokens = 0;

  // CPU tensor memory (MemoryTracker) at the end of the step and its peak
  // during the step; most micro-batch slices stashed at once.
  int64_t memory_current_bytes = 0;
  int64_t memory_peak_bytes = 0;
  // The process's peak over its whole life so far (DeviceMemory::
  // process_peak_bytes): at least memory_peak_bytes.
  int64_t memory_process_peak_bytes = 0;
  int64_t peak_stashed_slices = 0;
  // The peak split by what holds it: the parameters of every replica this
  // worker holds (under sharding full, its shards plus the most it gathered
  // whole at once in the step; under an asynchronous rule, every weight
  // version at the most kept at once in the step), their gradient buffers (the
  // most bytes of them held at once in the step: a stage whose gradients are
  // reduce-scattered holds its buffer only from its first weight gradient to
  // its shard step), the optimizer state, and the rest (activations, received
  // tensors and LibTorch's workspace) at the peak.
  int64_t weights_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t activations_bytes = 0;

  // The latest checkpoint whose share this worker has written durably by
  // the end of this step (its share may be no stage at all); 0 when none
  // yet, or when the job takes no checkpoints. Written in the background, a
  // checkpoint may be reported a step or more after its own step.
  int64_t checkpoint_step = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_STEP_METRICS_H_
