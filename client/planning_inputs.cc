#include "client/planning_inputs.h"

#include "client/cli_errors.h"
#include "jobspec/job_file.h"
#include "planner/analytic_profile.h"
#include "planner/cluster_file.h"
#include "planner/model_profile.h"

namespace chimera::client {

PlanningInputs LoadPlanningInputs(const std::string& job_file,
                                  const std::string& cluster_file,
                                  const std::string& profile_file) {
  PlanningInputs inputs;
  ExitOnFileErrors(
      job_file,
      jobspec::LoadJobFile(job_file, chimera::jobspec::SpecOnly(), &inputs.job));
  ExitOnFileErrors(cluster_file,
                   planner::LoadClusterFile(cluster_file, &inputs.cluster));
  if (profile_file.empty()) {
    inputs.profile = planner::AnalyticProfile(inputs.job.spec().model(),
                                              inputs.cluster.spec().device());
    return inputs;
  }
  ExitOnFileErrors(profile_file,
                   planner::LoadProfileFile(
                       profile_file, inputs.job.spec().model().num_layers(),
                       &inputs.profile));
  return inputs;
}

}  // namespace chimera::client
