// olplan html: one self-contained page (no server, no network) with the overview of `summary`,
// a memory chart per rank (bytes by owner), the SBP table (chosen signature and cost per op) and
// the predicted timeline of `simulate` (the last step, a few ranks). The data is embedded as JSON;
// the page's own script draws it (SVG). Opening it: any browser, file://.
#ifndef ONEFLOW_LIKE_TOOLS_PLAN_PLAN_HTML_H_
#define ONEFLOW_LIKE_TOOLS_PLAN_PLAN_HTML_H_

#include <string>
#include <vector>

#include "tools/plan/plan_report.h"
#include "tools/plan/plan_sim.h"

namespace oneflow_like {
namespace plan_tool {

// `sim` may be null (no timeline). At most `max_timeline_ranks` ranks are drawn.
std::string HtmlPage(const PlanSummary& summary, const std::vector<SbpDecision>& sbp, const Simulation* sim,
                     int max_timeline_ranks = 4);

}  // namespace plan_tool
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_TOOLS_PLAN_PLAN_HTML_H_
