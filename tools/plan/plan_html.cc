#include "tools/plan/plan_html.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

// JSON text safe inside <script>: no "</" sequences.
std::string ScriptSafe(const std::string& json) { return absl::StrReplaceAll(json, {{"</", "<\\/"}}); }

constexpr char kScript[] = R"JS(
"use strict";
const fmtBytes = (b) => { const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (Math.abs(b) >= 1024 && i < 4) { b /= 1024; i++; } return i ? b.toFixed(2) + " " + u[i] : b.toFixed(0) + " B"; };
const fmtSec = (s) => s >= 1 ? s.toFixed(2) + " s" : s >= 1e-3 ? (s * 1e3).toFixed(2) + " ms" : (s * 1e6).toFixed(1) + " us";
const NS = "http://www.w3.org/2000/svg";
function el(tag, attrs, text) { const e = document.createElement(tag);
  for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function svg(tag, attrs, text) { const e = document.createElementNS(NS, tag);
  for (const k in (attrs || {})) e.setAttribute(k, attrs[k]); if (text !== undefined) e.textContent = text; return e; }
function table(rows, head) { const t = el("table"); if (head) { const tr = el("tr"); head.forEach(h => tr.appendChild(el("th", {}, h))); t.appendChild(tr); }
  rows.forEach(r => { const tr = el("tr"); r.forEach(c => tr.appendChild(el("td", {}, String(c)))); t.appendChild(tr); }); return t; }

const S = DATA.summary;
document.getElementById("title").textContent = "olplan: " + S.job + " " + S.hash;
const ov = document.getElementById("overview");
ov.appendChild(table([
  ["world", S.world_size + " ranks (" + S.ranks_with_work + " with work)"],
  ["placements", S.placements.join("; ")],
  ["pieces per step", S.pieces_per_step],
  ["logical ops", S.logical_ops], ["tasks", S.tasks], ["registers", S.registers],
  ["moved per step", fmtBytes(S.bytes_per_step)],
  ["planned peak memory", fmtBytes(S.peak_bytes) + " on rank " + S.peak_rank],
  ["simulated step time", DATA.sim ? fmtSec(DATA.sim.step_seconds) : "(not simulated)"],
  ["compute idle (bubble + waits)", DATA.sim ? (DATA.sim.idle_fraction * 100).toFixed(1) + "%" : "-"],
]));
for (const [k, v] of [["tasks", S.tasks], ["peak", S.peak_bytes], ["bytes", S.bytes_per_step]]) ov.dataset[k] = v;

// memory: one stacked bar per rank (bytes by owner)
const M = DATA.memory, owners = [...new Set(M.ranks.flatMap(r => Object.keys(r.by_owner)))].sort();
const colors = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const ranks = M.ranks.slice(0, 64), maxBytes = Math.max(1, ...ranks.map(r => r.naive_bytes));
const W = 760, rowH = 16, chart = svg("svg", { width: W + 120, height: ranks.length * rowH + 30 });
ranks.forEach((r, i) => { let x = 60; chart.appendChild(svg("text", { x: 0, y: i * rowH + 12, "font-size": 11 }, "rank " + r.rank));
  owners.forEach((o, j) => { const w = (r.by_owner[o] || 0) / maxBytes * W; if (w <= 0) return;
    const rect = svg("rect", { x, y: i * rowH + 2, width: w, height: rowH - 4, fill: colors[j % colors.length] });
    rect.appendChild(svg("title", {}, o + ": " + fmtBytes(r.by_owner[o]))); chart.appendChild(rect); x += w; });
  const px = 60 + r.planned_bytes / maxBytes * W;
  chart.appendChild(svg("line", { x1: px, x2: px, y1: i * rowH, y2: i * rowH + rowH, stroke: "black", "stroke-width": 2 })); });
const mem = document.getElementById("memory");
mem.appendChild(el("p", {}, "Bars: bytes of every register by owner (without reuse); the black mark is the planned peak (with reuse)."));
mem.appendChild(chart);
const legend = el("p"); owners.forEach((o, j) => { const s = el("span", { style: "margin-right:12px;color:" + colors[j % colors.length] }, "\u25A0 " + o); legend.appendChild(s); });
mem.appendChild(legend);

// SBP table
const rows = DATA.sbp.ops.map(op => { const c = op.candidates.find(x => x.chosen) || { inputs: [], outputs: [], total_seconds: 0 };
  return [op.op, op.type, c.inputs.join(", "), c.outputs.join(", "), fmtSec(c.total_seconds), op.candidates.length]; });
document.getElementById("sbp").appendChild(table(rows.slice(0, 500), ["op", "type", "inputs", "outputs", "cost", "candidates"]));

// predicted timeline of the last step
if (DATA.sim && DATA.trace.length) {
  const lanes = [...new Set(DATA.trace.map(f => f[0] + "/" + f[1]))];
  const t0 = DATA.window[0], t1 = DATA.window[1], TW = 900, lh = 18;
  const tl = svg("svg", { width: TW + 110, height: lanes.length * lh + 20 });
  lanes.forEach((l, i) => tl.appendChild(svg("text", { x: 0, y: i * lh + 13, "font-size": 11 }, "r" + l.replace("/", " s"))));
  DATA.trace.forEach(f => { const i = lanes.indexOf(f[0] + "/" + f[1]); const x = 100 + (f[3] - t0) / (t1 - t0) * TW;
    const w = Math.max(0.5, f[4] / (t1 - t0) * TW); const r = svg("rect", { x, y: i * lh + 2, width: w, height: lh - 4, fill: f[2].includes("/grad") ? "#e15759" : "#4e79a7" });
    r.appendChild(svg("title", {}, f[2] + " " + fmtSec(f[4] * 1e-6))); tl.appendChild(r); });
  document.getElementById("timeline").appendChild(tl);
} else {
  document.getElementById("timeline").appendChild(el("p", {}, "(no simulation)"));
}
document.getElementById("status").textContent = "ok";
)JS";

}  // namespace

std::string HtmlPage(const PlanSummary& summary, const std::vector<SbpDecision>& sbp, const Simulation* sim,
                     int max_timeline_ranks) {
  std::string trace = "[]";
  double lo = 0, hi = 0;
  if (sim != nullptr && !sim->trace.empty() && sim->step_end.size() >= 2) {
    lo = sim->step_end[sim->step_end.size() - 2];
    hi = sim->step_end.back();
    std::set<int32_t> ranks;
    std::vector<std::string> rows;
    for (const Firing& f : sim->trace) {
      if (f.end < lo || f.start > hi) continue;
      const int32_t rank = sim->task_names[f.task].first;
      if (!ranks.count(rank)) {
        if (static_cast<int>(ranks.size()) >= max_timeline_ranks) continue;
        ranks.insert(rank);
      }
      rows.push_back(absl::StrFormat("[%d,%d,\"%s\",%.3f,%.3f]", rank, sim->task_streams[f.task],
                                     absl::StrReplaceAll(sim->task_names[f.task].second, {{"\"", "'"}, {"\\", "/"}}),
                                     f.start * 1e6, (f.end - f.start) * 1e6));
    }
    trace = absl::StrCat("[", absl::StrJoin(rows, ","), "]");
  }
  std::string data = absl::StrCat("{\"summary\":", SummaryJson(summary), ",\"memory\":", MemoryJson(summary, 0),
                                  ",\"sbp\":", SbpJson(sbp, ""), ",\"sim\":", sim ? SimulationJson(*sim) : "null",
                                  ",\"trace\":", trace, absl::StrFormat(",\"window\":[%.3f,%.3f]}", lo * 1e6, hi * 1e6));
  return absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>olplan</title>\n<style>"
      "body{font:13px sans-serif;margin:16px}table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ccc;"
      "padding:2px 6px;text-align:left}h2{margin-top:22px}</style></head><body>\n"
      "<h1 id=\"title\">olplan</h1><p>status: <span id=\"status\">loading</span></p>\n"
      "<h2>Overview</h2><div id=\"overview\"></div>\n<h2>Memory per rank</h2><div id=\"memory\"></div>\n"
      "<h2>SBP signatures</h2><div id=\"sbp\"></div>\n<h2>Predicted timeline (last step)</h2><div id=\"timeline\"></div>\n"
      "<script>const DATA = ", ScriptSafe(data), ";</script>\n<script>", kScript, "</script>\n</body></html>\n");
}

}  // namespace plan_tool
}  // namespace oneflow_like
