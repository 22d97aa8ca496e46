// A small valid TrainJob for tests that need a job but depend on only a few
// of its fields: they start from TinyJob() and set those, so each test shows
// the numbers it relies on. JobYaml() turns a job into a job file's text for
// the programs and loaders that read files.
//
//   chimera::v1::TrainJob job = TinyJob();
//   job.mutable_spec()->mutable_model()->set_dtype("float64");
//   const std::string file = dir.WriteFile("job.yaml", JobYaml(job));
#ifndef CHIMERA_TESTS_SUPPORT_TINY_JOB_H_
#define CHIMERA_TESTS_SUPPORT_TINY_JOB_H_

#include <string>

#include "chimera/v1/job.pb.h"

namespace chimera::testing {

// Job "tiny": a GPT of 2 blocks (hidden size 16, 2 heads, 8 tokens) on
// synthetic data; 1 step of SGD (lr 0.1) on a global batch of 4 in 2
// micro-batches of 2; 1F1B over 2 pipeline stages, 2 workers on CPU.
chimera::v1::TrainJob TinyJob();

// `job` as a job file: its protobuf JSON mapping, which is YAML as well.
std::string JobYaml(const chimera::v1::TrainJob& job);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_TINY_JOB_H_
