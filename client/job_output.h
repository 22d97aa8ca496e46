// How jobs, steps and workers look on a terminal: one-line step reports, the
// job table, the describe page, a progress bar with ETA.
#ifndef CHIMERA_CLIENT_JOB_OUTPUT_H_
#define CHIMERA_CLIENT_JOB_OUTPUT_H_

#include <string>
#include <vector>

#include "chimera/v1/service.pb.h"
#include "coordinator/job_states.h"

namespace chimera::client {

using coordinator::JobStateName;
// Parses a state name (any case, with or without the JOB_STATE_ prefix).
bool ParseJobState(const std::string& name, chimera::v1::JobState* state);

// "step 12/50  loss 4.2310  samples/s 120.5  tokens/s 7712  bubble 0.214  peak 120.4 MiB"
std::string FormatStep(const chimera::v1::StepSummary& step, int max_steps);
// `wide` adds columns (-o wide): micro-batches, last loss, workers, message.
std::string FormatJobTable(const std::vector<chimera::v1::Job>& jobs, bool wide = false);
std::string FormatJobStatus(const chimera::v1::Job& job);
std::string FormatJobDescription(const chimera::v1::Job& job);
// Why `plan` does not train the weights of mini-batch SGD, "asynchronous:
// ...", for the asynchronous schedules; "" for every other.
std::string AsynchronousNote(const chimera::v1::Plan& plan);
// "2026-11-28 02:20:01 recovery (stalled): chimera W=1 D=4 on 4 workers ->
// zb-h2 W=1 D=3 on 3 workers from step 8, not training for 5.2 s: <why>".
std::string FormatRecovery(const chimera::v1::JobRecovery& recovery);
// "predicted: step 0.063 s, bubble 0.029; measured (step 50): step 0.071 s,
// bubble 0.052 (+12.7%)" and a newline, only the prediction before the first
// step, nothing for a job without one.
std::string FormatPredictedAgainstMeasured(const chimera::v1::Job& job);
// The same against the median step of `steps` (a run's history, oldest
// first) after its first tenth, whose first steps warm up: "predicted: step
// 0.040 s, bubble 0.548; measured (median of steps 6-50): step 0.042 s,
// bubble 0.561 (+5.0%)". One step is a noisy measure of a short one.
std::string FormatPredictedAgainstSteps(
    const chimera::v1::Job& job,
    const std::vector<chimera::v1::StepSummary>& steps);
// "memory: predicted peak 14.5 MiB (the largest rank's); measured 15.2 MiB
// (+4.8%)" and a newline: the plan's peak against the largest a rank reported
// for its last step; only the prediction before any report, nothing for a
// plan without one.
std::string FormatMemoryAgainstMeasured(const chimera::v1::Job& job);
// The bubble ratio the plan predicts for `rank`, "0.214", or "-" where the
// prediction has none for it (a data-parallel replica it did not simulate).
std::string FormatPredictedBubble(const chimera::v1::Job& job, int rank);
// `wide` adds host, devices, incarnation, last heartbeat and the op its task
// was in then.
std::string FormatWorkerTable(const std::vector<chimera::v1::WorkerInfo>& workers,
                              bool wide = false);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_OUTPUT_H_
