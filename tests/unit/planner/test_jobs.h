// Jobs, clusters and profiles for planner tests, built in code so each test
// shows the numbers it depends on.
#ifndef CHIMERA_TESTS_UNIT_PLANNER_TEST_JOBS_H_
#define CHIMERA_TESTS_UNIT_PLANNER_TEST_JOBS_H_

#include <cstdint>
#include <string>

#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"
#include "common/version.h"
#include "planner/analytic_profile.h"

namespace chimera::planner::testing {

// A GPT of `layers` blocks, hidden 1024, seq 512, vocab 30522 (BERT-large
// like), AdamW, synthetic data, `workers` workers.
inline chimera::v1::TrainJob LargeJob(int layers, int global_batch, int workers) {
  chimera::v1::TrainJob job;
  job.set_api_version(kApiVersion);
  job.set_kind("TrainJob");
  job.mutable_metadata()->set_name("test");
  auto* spec = job.mutable_spec();
  auto* model = spec->mutable_model();
  model->set_family("gpt");
  model->set_num_layers(layers);
  model->set_hidden_size(1024);
  model->set_num_heads(16);
  model->set_seq_length(512);
  model->set_vocab_size(30522);
  spec->mutable_data()->set_format("synthetic");
  auto* training = spec->mutable_training();
  training->set_global_batch_size(global_batch);
  training->set_max_steps(1);
  training->mutable_optimizer()->set_name("adamw");
  training->mutable_optimizer()->set_lr(1e-4);
  spec->mutable_resources()->set_workers(workers);
  return job;
}

// `nodes` x `per_node` V100-like devices (32 GiB, 125 TFLOP/s), NVLink-like
// inside a node, `inter_bandwidth` bytes/s between nodes.
inline chimera::v1::Cluster TestCluster(int nodes, int per_node,
                                        double inter_bandwidth = 1.2e10,
                                        int64_t memory_bytes = int64_t{32} << 30) {
  chimera::v1::Cluster cluster;
  cluster.set_api_version(kApiVersion);
  cluster.set_kind("Cluster");
  cluster.mutable_metadata()->set_name("test");
  auto* spec = cluster.mutable_spec();
  spec->set_nodes(nodes);
  spec->set_devices_per_node(per_node);
  spec->mutable_device()->set_memory_bytes(memory_bytes);
  spec->mutable_device()->set_peak_flops(1.25e14);
  spec->mutable_links()->mutable_intra_node()->set_latency_seconds(5e-6);
  spec->mutable_links()->mutable_intra_node()->set_bandwidth_bytes_per_second(1.5e11);
  spec->mutable_links()->mutable_inter_node()->set_latency_seconds(2e-5);
  spec->mutable_links()->mutable_inter_node()->set_bandwidth_bytes_per_second(inter_bandwidth);
  return cluster;
}

// The analytic profile of `job`'s model with the first half of its blocks
// computing twice as long on an eighth of the parameters: a model shaped
// like the convolutional networks DAPPLE replicates (VGG-19: 15:1), whose
// early layers are heavy on compute and light on weights.
inline chimera::v1::ModelProfile HeavyFirstHalf(
    const chimera::v1::TrainJob& job, const chimera::v1::Cluster& cluster) {
  chimera::v1::ModelProfile profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const int blocks = job.spec().model().num_layers();
  for (int b = 1; b <= blocks / 2; ++b) {
    chimera::v1::LayerProfile& layer = *profile.mutable_layers(b);
    for (auto& timing : *layer.mutable_timings()) {
      timing.set_forward_seconds(2 * timing.forward_seconds());
      timing.set_backward_seconds(2 * timing.backward_seconds());
    }
    layer.set_parameter_bytes(layer.parameter_bytes() / 8);
  }
  return profile;
}

}  // namespace chimera::planner::testing

#endif  // CHIMERA_TESTS_UNIT_PLANNER_TEST_JOBS_H_
