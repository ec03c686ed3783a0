#include "tools/plan/link_price.h"

#include <algorithm>

namespace oneflow_like {
namespace plan_tool {

double MessagePrice::Seconds(int64_t bytes) const {
  const double b = static_cast<double>(std::max<int64_t>(0, bytes));
  const double large_beta = large_bytes_per_second > 0 ? 1.0 / large_bytes_per_second : 0.0;
  if (!has_small_rate()) return alpha_seconds + b * large_beta;
  const double s = static_cast<double>(small_message_bytes), l = static_cast<double>(large_message_bytes);
  const double small_beta = 1.0 / small_bytes_per_second;
  // the bytes beyond S: what a large message costs beyond its first S bytes, per byte
  const double rest_beta = std::max(0.0, (l * large_beta - s * small_beta) / (l - s));
  return alpha_seconds + std::min(b, s) * small_beta + std::max(0.0, b - s) * rest_beta;
}

}  // namespace plan_tool
}  // namespace oneflow_like
