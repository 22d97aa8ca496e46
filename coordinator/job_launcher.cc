#include "coordinator/job_launcher.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/params_proto.h"
#include "schedule/program_proto.h"
#include "schedule/rank_schedule.h"
#include "schedule/validator.h"

namespace chimera::coordinator {
namespace {

std::string ScheduleName(const chimera::v1::Plan& plan) {
  return absl::StrCat("the ", plan.scheme(), " schedule for W=", plan.width(),
                      " D=", plan.depth(), " N=", plan.micro_batches());
}

}  // namespace

std::optional<int> DeviceIndex(const chimera::v1::WorkerInfo& worker,
                               const std::string& kind) {
  for (const auto& device : worker.devices()) {
    if (device.kind() == kind) return device.index();
  }
  return std::nullopt;
}

absl::StatusOr<Launch> PrepareLaunch(chimera::v1::Plan plan,
                                     const ScheduleGenerator& generate) {
  ASSIGN_OR_RETURN(schedule::ScheduleParams params,
                   schedule::ScheduleParamsOf(plan));
  ASSIGN_OR_RETURN(schedule::Schedule schedule, generate(params));
  // The workers run what they are sent: this is the last place a wrong
  // program can be caught before it deadlocks or trains wrong weights.
  if (absl::Status valid = schedule::ValidateSchedule(schedule); !valid.ok()) {
    return absl::InternalError(absl::StrCat(ScheduleName(plan),
                                            " is invalid: ", valid.message()));
  }
  Launch launch;
  launch.programs = schedule::ToProto(schedule);
  launch.outline = schedule::ToProto(schedule::OutlineOf(schedule));
  for (chimera::v1::WorkerProgram& program : launch.programs) {
    for (chimera::v1::StageReplica& replica : *program.mutable_stages()) {
      const auto& range = plan.partition(
          schedule.topology.ModelStage({replica.chunk(), replica.stage()}));
      replica.set_first_layer(range.first_layer());
      replica.set_num_layers(range.num_layers());
    }
  }
  launch.plan = std::move(plan);
  return launch;
}

void PlaceOnWorkers(const std::vector<chimera::v1::WorkerInfo>& workers,
                    const std::string& device_kind, chimera::v1::Plan* plan) {
  plan->clear_placement();
  std::map<std::string, int> node_index;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const chimera::v1::WorkerInfo& info = workers[rank];
    const int node =
        node_index.emplace(info.node(), node_index.size()).first->second;
    chimera::v1::Placement* placed = plan->add_placement();
    placed->set_rank(static_cast<int>(rank));
    placed->set_node(node);
    placed->set_device(DeviceIndex(info, device_kind).value_or(0));
  }
}

}  // namespace chimera::coordinator
