// A progress bar with an estimate of the time left, for a terminal: job
// steps followed by `chimera submit`/`run`, input read by
// `chimera tokenize`.
#ifndef CHIMERA_COMMON_PROGRESS_BAR_H_
#define CHIMERA_COMMON_PROGRESS_BAR_H_

#include <string>

namespace chimera {

// "[=========>          ] 12/50  ETA 1m20s": `done` of `total` units,
// each taking `seconds_per_unit`.
std::string ProgressBar(int done, int total, double seconds_per_unit);

}  // namespace chimera

#endif  // CHIMERA_COMMON_PROGRESS_BAR_H_
