// Summaries of repeated measurements.
#ifndef CHIMERA_COMMON_STATISTICS_H_
#define CHIMERA_COMMON_STATISTICS_H_

#include <vector>

namespace chimera {

// The middle of `values`, the upper of the two middle ones for an even
// count (always one of the values measured); 0 for none.
double Median(std::vector<double> values);

}  // namespace chimera

#endif  // CHIMERA_COMMON_STATISTICS_H_
