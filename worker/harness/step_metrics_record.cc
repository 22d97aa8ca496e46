#include "worker/harness/step_metrics_record.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace chimera::worker::harness {

// Layout: one line per step,
//   step step_seconds busy bubble recv_wait allreduce_wait has_loss loss
//   samples tokens memory_current memory_peak peak_stashed weights gradients
//   optimizer ops op_seconds... op_cpu_seconds...
// with doubles written at full precision.

std::string RankMetricsPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank-", rank, ".metrics");
}

absl::Status WriteStepMetrics(const std::string& path,
                              const std::vector<StepMetrics>& steps) {
  std::ofstream out(path, std::ios::trunc);
  out.precision(std::numeric_limits<double>::max_digits10);
  for (const StepMetrics& m : steps) {
    out << m.step << ' ' << m.step_seconds << ' ' << m.busy_seconds << ' '
        << m.bubble_seconds << ' ' << m.recv_wait_seconds << ' '
        << m.allreduce_wait_seconds << ' ' << m.has_loss << ' ' << m.loss << ' '
        << m.samples << ' ' << m.tokens << ' ' << m.memory_current_bytes << ' '
        << m.memory_peak_bytes << ' ' << m.peak_stashed_slices << ' '
        << m.weights_bytes << ' ' << m.gradients_bytes << ' '
        << m.optimizer_bytes << ' ' << m.op_seconds.size();
    for (double seconds : m.op_seconds) out << ' ' << seconds;
    for (size_t i = 0; i < m.op_seconds.size(); ++i) {
      out << ' ' << (i < m.op_cpu_seconds.size() ? m.op_cpu_seconds[i] : 0.0);
    }
    out << '\n';
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StepMetrics>> ReadStepMetrics(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<StepMetrics> steps;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    StepMetrics& m = steps.emplace_back();
    size_t ops = 0;
    fields >> m.step >> m.step_seconds >> m.busy_seconds >> m.bubble_seconds >>
        m.recv_wait_seconds >> m.allreduce_wait_seconds >> m.has_loss >>
        m.loss >> m.samples >> m.tokens >> m.memory_current_bytes >>
        m.memory_peak_bytes >> m.peak_stashed_slices >> m.weights_bytes >>
        m.gradients_bytes >> m.optimizer_bytes >> ops;
    m.op_seconds.resize(ops);
    for (double& seconds : m.op_seconds) fields >> seconds;
    m.op_cpu_seconds.resize(ops);
    for (double& seconds : m.op_cpu_seconds) fields >> seconds;
    if (!fields) {
      return absl::DataLossError(
          absl::StrCat(path, ": line ", steps.size(), " is truncated"));
    }
  }
  return steps;
}

}  // namespace chimera::worker::harness
