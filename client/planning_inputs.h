// What the offline planning commands (`chimera plan`, `chimera schedule -f`)
// read: a job file, a cluster file and, optionally, a measured model
// profile (else the analytic model of the job's transformer on the
// cluster's device).
//
//   const PlanningInputs inputs = LoadPlanningInputs(job, cluster, profile);
//   planner::SearchPlans(inputs.job, inputs.cluster, inputs.profile, {});
#ifndef CHIMERA_CLIENT_PLANNING_INPUTS_H_
#define CHIMERA_CLIENT_PLANNING_INPUTS_H_

#include <string>

#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"

namespace chimera::client {

struct PlanningInputs {
  chimera::v1::TrainJob job;
  chimera::v1::Cluster cluster;
  chimera::v1::ModelProfile profile;
};

// Reads and validates the files; an empty PROFILE_FILE takes the analytic
// profile. Exits 2 naming the file and every bad field.
PlanningInputs LoadPlanningInputs(const std::string& job_file,
                                  const std::string& cluster_file,
                                  const std::string& profile_file);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_PLANNING_INPUTS_H_
