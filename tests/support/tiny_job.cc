#include "tests/support/tiny_job.h"

#include "common/version.h"
#include "google/protobuf/util/json_util.h"

namespace chimera::testing {

chimera::v1::TrainJob TinyJob() {
  chimera::v1::TrainJob job;
  job.set_api_version(kApiVersion);
  job.set_kind("TrainJob");
  job.mutable_metadata()->set_name("tiny");
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  chimera::v1::ModelSpec& model = *spec.mutable_model();
  model.set_family("gpt");
  model.set_num_layers(2);
  model.set_hidden_size(16);
  model.set_num_heads(2);
  model.set_seq_length(8);
  spec.mutable_data()->set_format("synthetic");
  chimera::v1::TrainingSpec& training = *spec.mutable_training();
  training.set_global_batch_size(4);
  training.set_micro_batch_size(2);
  training.set_max_steps(1);
  training.mutable_optimizer()->set_name("sgd");
  training.mutable_optimizer()->set_lr(0.1);
  chimera::v1::ParallelismSpec& parallelism = *spec.mutable_parallelism();
  parallelism.set_schedule("1f1b");
  parallelism.set_pipeline(2);
  parallelism.set_data(1);
  parallelism.set_micro_batches(2);
  spec.mutable_resources()->set_workers(2);
  spec.mutable_resources()->set_device("cpu");
  return job;
}

std::string JobYaml(const chimera::v1::TrainJob& job) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  std::string json;
  // Printing fails only for strings that are not UTF-8, which no test's job
  // holds.
  google::protobuf::util::MessageToJsonString(job, &json, options);
  return json;
}

}  // namespace chimera::testing
