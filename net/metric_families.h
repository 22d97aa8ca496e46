// Building Prometheus metric families by hand, for collectables that compute
// their samples when scraped (the coordinator's and the worker daemon's).
#ifndef CHIMERA_NET_METRIC_FAMILIES_H_
#define CHIMERA_NET_METRIC_FAMILIES_H_

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace chimera::net {

prometheus::MetricFamily MetricFamily(const char* name, const char* help,
                                      prometheus::MetricType type);

// Adds one sample; sets the gauge or counter value as the family's type says.
void AddSample(prometheus::MetricFamily& family,
               std::vector<prometheus::ClientMetric::Label> labels,
               double value);

}  // namespace chimera::net

#endif  // CHIMERA_NET_METRIC_FAMILIES_H_
