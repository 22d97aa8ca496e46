// What a queued job starts with, prepared off the coordinator's lock: the
// plan its search chose and every rank's program, generated from that plan
// at the job's full width and proven by the schedule validator before any
// worker hears of it. A schedule the validator refuses starts nothing; the
// job fails with the validator's words.
//
//   ASSIGN_OR_RETURN(Launch launch, PrepareLaunch(plan));
//   PlaceOnWorkers(infos_of_chosen_workers, "cpu", &launch.plan);
//   // launch.programs[r] goes to rank r's worker, launch.outline to all.
#ifndef CHIMERA_COORDINATOR_JOB_LAUNCHER_H_
#define CHIMERA_COORDINATOR_JOB_LAUNCHER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/plan.pb.h"
#include "chimera/v1/program.pb.h"
#include "chimera/v1/service.pb.h"
#include "schedule/generator.h"

namespace chimera::coordinator {

// Turns a plan's schedule parameters into the programs of every rank:
// schedule::GenerateSchedule, or in tests one that breaks its output.
using ScheduleGenerator = std::function<absl::StatusOr<schedule::Schedule>(
    const schedule::ScheduleParams&)>;

struct Launch {
  chimera::v1::Plan plan;
  // One per rank, in rank order, each with the layers of the model stages
  // it holds.
  std::vector<chimera::v1::WorkerProgram> programs;
  // What every rank is told of the others' programs.
  chimera::v1::ScheduleOutline outline;
};

// Generates `plan`'s schedule with `generate` for every data-parallel
// replica and validates it whole. An invalid schedule is INTERNAL (a
// generator's bug, not the job's): "the <scheme> schedule for W=.. D=..
// N=.. is invalid: <what the validator found>".
absl::StatusOr<Launch> PrepareLaunch(
    chimera::v1::Plan plan,
    const ScheduleGenerator& generate = schedule::GenerateSchedule);

// The index of `worker`'s first device of `kind` ("cpu", "gpu"); none when
// it has none.
std::optional<int> DeviceIndex(const chimera::v1::WorkerInfo& worker,
                               const std::string& kind);

// Sets `plan`'s placement: rank i on workers[i], its node numbered in order
// of first appearance, its device that worker's first of `device_kind` (0
// when it has none).
void PlaceOnWorkers(const std::vector<chimera::v1::WorkerInfo>& workers,
                    const std::string& device_kind, chimera::v1::Plan* plan);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_LAUNCHER_H_
