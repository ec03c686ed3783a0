#include "tools/plan/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/plan_rates.h"
#include "oneflow_like/compiler/plan/plan_bytes.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/sbp.h"

namespace oneflow_like {
namespace plan_tool {
namespace {

std::string NdText(const NdSbpProto& proto) {
  absl::StatusOr<NdSbp> nd = NdSbp::FromProto(proto);
  return nd.ok() ? nd->ToString() : "?";
}

int64_t PayloadBytes(const RegisterProto& reg) {
  int64_t total = 0;
  for (const TensorDescProto& slot : reg.slots()) total += compiler::SlotBytes(slot);
  return total;
}

bool IsOptimizerState(const std::string& name) {
  return name.find("/adam_") != std::string::npos || name.find("/momentum") != std::string::npos ||
         name.rfind("optimizer/", 0) == 0;
}

bool IsOptimizerOp(const std::string& type) {
  return type == "sgd_update" || type == "sgd_plain_update" || type == "adam_update" || type == "step_increment";
}

std::string Category(const TaskProto& task, const std::map<std::string, TensorBindingProto::Kind>& bindings) {
  switch (task.type()) {
    case TaskProto::SOURCE: {
      auto it = bindings.find(task.io().tensor_name());
      if (it != bindings.end() && it->second == TensorBindingProto::VARIABLE) {
        return IsOptimizerState(task.io().tensor_name()) ? "optimizer state" : "parameters";
      }
      return "inputs";
    }
    case TaskProto::COMPUTE:
      if (IsOptimizerOp(task.compute().op_type())) return "optimizer updates";
      return task.op_name().find("/grad") != std::string::npos ? "gradients" : "activations";
    case TaskProto::TRANSFER:
    case TaskProto::BOXING_SLICE:
    case TaskProto::BOXING_CONCAT:
    case TaskProto::BOXING_ADD:
    case TaskProto::COLLECTIVE:
      return "communication";
    case TaskProto::COPY: return "host/device copies";
    case TaskProto::ACCUMULATE: return "gradient accumulation";
    case TaskProto::REPEAT: return "repeated variables";
    case TaskProto::SINK: return "outputs";
    default: return "other";
  }
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string RankSetText(const std::set<int32_t>& ranks) {
  std::vector<int32_t> v(ranks.begin(), ranks.end());
  if (v.size() > 2 && v.back() - v.front() + 1 == static_cast<int32_t>(v.size())) {
    return absl::StrCat("ranks ", v.front(), "-", v.back());
  }
  return absl::StrCat("ranks [", absl::StrJoin(v, ","), "]");
}

std::string Seconds(double s) {
  if (s >= 1) return absl::StrFormat("%.2f s", s);
  if (s >= 1e-3) return absl::StrFormat("%.2f ms", s * 1e3);
  return absl::StrFormat("%.1f us", s * 1e6);
}

// An input whose producer's layout is not the one consumed (input -1 is a variable's update
// edge, priced by SBP selection as well; it is listed when it moves bytes).
bool IsTransform(const SbpCandidateProto::InputCommCost& ic) {
  return !(ic.boxing().empty() || ic.boxing() == "none" || ic.boxing() == "identity");
}

}  // namespace

std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.2f %s", bytes, units[u]);
}

absl::StatusOr<int64_t> ParseBytes(const std::string& text) {
  std::string t(absl::StripAsciiWhitespace(text));
  size_t i = 0;
  while (i < t.size() && (absl::ascii_isdigit(t[i]) || t[i] == '.')) ++i;
  double value = 0;
  if (i == 0 || !absl::SimpleAtod(t.substr(0, i), &value)) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not a memory size (e.g. 16GiB, 512MiB, 1.5GB)"));
  }
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(i)));
  const std::map<std::string, double> scale = {{"", 1},         {"b", 1},         {"k", 1024},      {"kib", 1024},
                                               {"kb", 1e3},     {"m", 1 << 20},   {"mib", 1 << 20}, {"mb", 1e6},
                                               {"g", 1 << 30},  {"gib", 1 << 30}, {"gb", 1e9},      {"t", 1099511627776.0},
                                               {"tib", 1099511627776.0},          {"tb", 1e12}};
  auto it = scale.find(unit);
  if (it == scale.end()) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': unknown unit '", unit, "' (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"));
  }
  const double bytes = value * it->second;
  if (bytes <= 0 || bytes > 9e18) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is out of range"));
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<PlanSummary> Summarize(const PlanProto& plan, const ReportOptions& options) {
  PlanSummary s;
  s.job_name = plan.job_name();
  s.hash = plan.content_hash();
  s.world_size = plan.world_size();
  s.ranks_with_work = plan.ranks_size();
  s.pieces_per_step = std::max<int64_t>(1, plan.pieces_per_step());
  s.logical_ops = plan.sbp_decisions_size();
  ASSIGN_OR_RETURN(auto firings, actor::FiringsPerStep(plan));
  std::map<int32_t, const RankMemoryProto*> memory;
  for (const RankMemoryProto& m : plan.memory()) memory[m.rank()] = &m;
  std::map<std::string, std::set<int32_t>> op_ranks;
  const int32_t per_node = std::max(1, options.ranks_per_node);
  for (const RankPlanProto& rp : plan.rank_plans()) {
    RankReport r;
    r.rank = rp.rank();
    std::map<std::string, TensorBindingProto::Kind> bindings;
    for (const TensorBindingProto& b : rp.bindings()) bindings[b.tensor_name()] = b.kind();
    absl::flat_hash_map<int64_t, const TaskProto*> tasks;
    for (const TaskProto& t : rp.tasks()) {
      tasks[t.id()] = &t;
      ++r.tasks_by_type[TaskProto::Type_Name(t.type())];
      if (t.type() == TaskProto::COMPUTE) {
        ++r.compute_tasks;
        op_ranks[t.op_name()].insert(rp.rank());
      }
    }
    r.tasks = rp.tasks_size();
    for (const MemoryBlockProto& b : rp.memory_blocks()) {
      if (b.persistent()) r.persistent_bytes += b.size_bytes();
    }
    for (const RegisterProto& reg : rp.registers()) {
      if (reg.has_remote()) {
        // A mirror of a register produced on another rank: the runtime stages its buffers in
        // memory of its own (actor/runtime_build.cc), outside the planned blocks.
        const int64_t bytes = compiler::MirrorStagingBytes(reg);
        r.staging_bytes += bytes;
        r.bytes_by_category["transfer staging"] += bytes;
        continue;
      }
      if (!reg.has_memory()) continue;  // control only
      ++r.registers;
      const int64_t bytes = reg.memory().buffer_bytes() * std::max(1, reg.count());
      r.naive_bytes += bytes;
      auto producer = tasks.find(reg.producer().task_id());
      const std::string category = producer == tasks.end() ? "other" : Category(*producer->second, bindings);
      r.bytes_by_category[category] += bytes;
      r.largest.push_back({reg.name(), category, bytes});
      if (producer != tasks.end() && producer->second->type() == TaskProto::TRANSFER) {
        auto f = firings.find(producer->second->id());
        const int64_t per_step = PayloadBytes(reg) * (f == firings.end() ? s.pieces_per_step : f->second);
        r.bytes_received_per_step += per_step;
        s.bytes_per_step += per_step;
        const int32_t peer = producer->second->transfer().peer_rank();
        s.bytes_by_link[peer / per_node == rp.rank() / per_node ? "intra-node" : "inter-node"] += per_step;
      }
    }
    std::sort(r.largest.begin(), r.largest.end(),
              [](const RegisterUse& a, const RegisterUse& b) { return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name; });
    if (r.largest.size() > 5) r.largest.resize(5);
    auto m = memory.find(rp.rank());
    r.block_bytes = m != memory.end() ? m->second->planned_bytes() : r.naive_bytes;
    if (m != memory.end()) {
      for (const DeviceMemoryProto& d : m->second->devices()) {
        r.devices.push_back({absl::StrCat(d.device().type(), ":", d.device().index()), d.planned_bytes(), d.naive_bytes()});
      }
    }
    r.planned_bytes = r.block_bytes + r.staging_bytes;  // what the rank's allocator will hold at its peak
    r.device_bytes = r.planned_bytes;
    if (!r.devices.empty()) {
      r.device_bytes = 0;
      for (const DeviceBytes& d : r.devices) {
        if (d.device.rfind("cpu:", 0) != 0) r.device_bytes = std::max(r.device_bytes, d.planned_bytes);
      }
    }
    s.peak_device_bytes = std::max(s.peak_device_bytes, r.device_bytes);
    s.tasks += r.tasks;
    s.registers += r.registers;
    if (r.planned_bytes > s.peak_bytes || s.ranks.empty()) {
      s.peak_bytes = r.planned_bytes;
      s.peak_rank = r.rank;
    }
    s.ranks.push_back(std::move(r));
  }
  std::set<std::set<int32_t>> placements;  // ordered by their ranks
  for (const auto& [op, ranks] : op_ranks) placements.insert(ranks);
  for (const std::set<int32_t>& ranks : placements) s.placements.push_back(RankSetText(ranks));
  s.stages = std::max<int32_t>(1, static_cast<int32_t>(placements.size()));
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    if (d.chosen() < 0 || d.chosen() >= d.candidates_size()) continue;
    // SBP selection prices each op per step (its seconds times its firings per step)
    s.serial_estimate_seconds += d.candidates(d.chosen()).total_seconds();
  }
  return s;
}

std::vector<SbpDecision> SbpDecisions(const PlanProto& plan) {
  std::vector<SbpDecision> out;
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    SbpDecision decision{d.op_name(), d.op_type(), {}};
    for (int i = 0; i < d.candidates_size(); ++i) {
      const SbpCandidateProto& c = d.candidates(i);
      SbpCandidate cand;
      for (const NdSbpProto& p : c.inputs()) cand.inputs.push_back(NdText(p));
      for (const NdSbpProto& p : c.outputs()) cand.outputs.push_back(NdText(p));
      cand.compute_seconds = c.compute_seconds();
      cand.comm_seconds = c.comm_seconds();
      cand.total_seconds = c.total_seconds();
      for (const auto& ic : c.input_comm()) {
        if (!IsTransform(ic)) continue;
        cand.comm.push_back(absl::StrCat("in", ic.input(), " ", NdText(ic.producer_nd_sbp()), " -> ", ic.boxing(), " ",
                                         HumanBytes(ic.bytes()), " ", Seconds(ic.seconds())));
      }
      cand.rejected_reason = c.rejected_reason();
      cand.chosen = i == d.chosen();
      decision.candidates.push_back(std::move(cand));
    }
    out.push_back(std::move(decision));
  }
  return out;
}

std::vector<BoxingEntry> BoxingEntries(const PlanProto& plan) {
  std::vector<BoxingEntry> out;
  std::map<std::string, size_t> index;  // (tensor, from, to, pattern) -> entry
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) {
    if (d.chosen() < 0 || d.chosen() >= d.candidates_size()) continue;
    const SbpCandidateProto& c = d.candidates(d.chosen());
    for (const auto& ic : c.input_comm()) {
      if (!IsTransform(ic)) continue;
      BoxingEntry e;
      e.op_name = d.op_name();
      e.input = ic.input();
      e.tensor = ic.tensor();
      e.from = NdText(ic.producer_nd_sbp());
      e.to = ic.input() >= 0 && ic.input() < c.inputs_size() ? NdText(c.inputs(ic.input())) : "?";
      e.pattern = ic.boxing();
      e.bytes = ic.bytes();
      e.seconds = ic.seconds();
      if (!e.tensor.empty() && e.input >= 0) {
        const std::string key = absl::StrCat(e.tensor, "#", e.from, "#", e.to, "#", e.pattern);
        auto [it, inserted] = index.emplace(key, out.size());
        if (!inserted) {
          out[it->second].also_read_by.push_back(absl::StrCat(e.op_name, " input ", e.input));
          continue;
        }
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

namespace {

// " (cpu:0 1.0 KiB, cuda:0 4.0 KiB)" for a rank on several devices, else "".
std::string DevicesText(const std::vector<DeviceBytes>& devices) {
  if (devices.empty()) return "";
  std::vector<std::string> parts;
  for (const DeviceBytes& d : devices) parts.push_back(absl::StrCat(d.device, " ", HumanBytes(d.planned_bytes)));
  return absl::StrCat(" (", absl::StrJoin(parts, ", "), ")");
}

// ",\"devices\":[...]" for a rank on several devices, else "".
std::string DevicesJson(const std::vector<DeviceBytes>& devices) {
  if (devices.empty()) return "";
  std::vector<std::string> parts;
  for (const DeviceBytes& d : devices) {
    parts.push_back(absl::StrFormat("{\"device\":%s,\"planned_bytes\":%d,\"naive_bytes\":%d}", Quote(d.device),
                                    d.planned_bytes, d.naive_bytes));
  }
  return absl::StrCat(",\"devices\":[", absl::StrJoin(parts, ","), "]");
}

}  // namespace

std::string SummaryText(const PlanSummary& s) {
  std::string out = absl::StrFormat("plan '%s' %s\n", s.job_name, s.hash);
  absl::StrAppendFormat(&out, "  world %d ranks (%d with work), %d placement(s) of ops: %s\n", s.world_size,
                        s.ranks_with_work, s.placements.size(), absl::StrJoin(s.placements, "; "));
  absl::StrAppendFormat(&out, "  %d pieces (micro-batches x accumulation) per step, %d logical ops, %d tasks, %d registers\n",
                        s.pieces_per_step, s.logical_ops, s.tasks, s.registers);
  int64_t min_tasks = INT64_MAX, max_tasks = 0;
  for (const RankReport& r : s.ranks) {
    min_tasks = std::min(min_tasks, r.tasks);
    max_tasks = std::max(max_tasks, r.tasks);
  }
  if (!s.ranks.empty()) absl::StrAppendFormat(&out, "  tasks per rank: %d .. %d\n", min_tasks, max_tasks);
  std::string links;
  for (const auto& [link, bytes] : s.bytes_by_link) absl::StrAppend(&links, links.empty() ? "" : ", ", link, " ", HumanBytes(bytes));
  absl::StrAppendFormat(&out, "  moved per step: %s%s\n", HumanBytes(s.bytes_per_step), links.empty() ? "" : " (" + links + ")");
  absl::StrAppendFormat(&out, "  planned peak memory: %s on rank %d (per rank: ", HumanBytes(s.peak_bytes), s.peak_rank);
  for (size_t i = 0; i < s.ranks.size() && i < 8; ++i) {
    absl::StrAppend(&out, i ? ", " : "", "r", s.ranks[i].rank, " ", HumanBytes(s.ranks[i].planned_bytes),
                    DevicesText(s.ranks[i].devices));
  }
  absl::StrAppend(&out, s.ranks.size() > 8 ? ", ...)\n" : ")\n");
  absl::StrAppendFormat(&out, "  cost model, serial estimate (no overlap): %s per step\n", Seconds(s.serial_estimate_seconds));
  return out;
}

std::string SummaryJson(const PlanSummary& s) {
  std::string links;
  for (const auto& [link, bytes] : s.bytes_by_link) absl::StrAppend(&links, links.empty() ? "" : ",", Quote(link), ":", bytes);
  std::vector<std::string> placements, ranks;
  for (const std::string& p : s.placements) placements.push_back(Quote(p));
  for (const RankReport& r : s.ranks) {
    ranks.push_back(absl::StrFormat("{\"rank\":%d,\"tasks\":%d,\"registers\":%d,\"planned_bytes\":%d,\"naive_bytes\":%d,"
                                    "\"bytes_received_per_step\":%d%s}",
                                    r.rank, r.tasks, r.registers, r.planned_bytes, r.naive_bytes, r.bytes_received_per_step,
                                    DevicesJson(r.devices)));
  }
  return absl::StrFormat(
      "{\"job\":%s,\"hash\":%s,\"world_size\":%d,\"ranks_with_work\":%d,\"pieces_per_step\":%d,\"stages\":%d,"
      "\"placements\":[%s],\"logical_ops\":%d,\"tasks\":%d,\"registers\":%d,\"bytes_per_step\":%d,\"bytes_by_link\":{%s},"
      "\"peak_bytes\":%d,\"peak_rank\":%d,\"serial_estimate_seconds\":%.9g,\"ranks\":[%s]}\n",
      Quote(s.job_name), Quote(s.hash), s.world_size, s.ranks_with_work, s.pieces_per_step, s.stages,
      absl::StrJoin(placements, ","), s.logical_ops, s.tasks, s.registers, s.bytes_per_step, links, s.peak_bytes,
      s.peak_rank, s.serial_estimate_seconds, absl::StrJoin(ranks, ","));
}

std::string MemoryText(const PlanSummary& s, int64_t device_memory_bytes) {
  std::string out = absl::StrFormat("planned memory per rank (plan '%s'):\n", s.job_name);
  // Ranks with the same numbers print once (a 512-rank plan has a few distinct rank kinds).
  std::vector<std::pair<std::vector<int32_t>, const RankReport*>> groups;
  for (const RankReport& r : s.ranks) {
    bool merged = false;
    for (auto& [ranks, first] : groups) {
      if (first->planned_bytes == r.planned_bytes && first->persistent_bytes == r.persistent_bytes &&
          first->naive_bytes == r.naive_bytes && first->bytes_by_category == r.bytes_by_category &&
          first->devices == r.devices) {
        ranks.push_back(r.rank);
        merged = true;
        break;
      }
    }
    if (!merged) groups.push_back({{r.rank}, &r});
  }
  for (const auto& [ranks, r] : groups) {
    std::set<int32_t> set(ranks.begin(), ranks.end());
    absl::StrAppendFormat(&out, "  %s: peak %s (planned blocks %s + transfer staging %s; persistent %s; registers without reuse %s)",
                          ranks.size() == 1 ? absl::StrCat("rank ", ranks[0]) : RankSetText(set),
                          HumanBytes(r->planned_bytes), HumanBytes(r->block_bytes), HumanBytes(r->staging_bytes),
                          HumanBytes(r->persistent_bytes), HumanBytes(r->naive_bytes));
    if (device_memory_bytes > 0) {
      absl::StrAppend(&out, r->device_bytes <= device_memory_bytes ? "  fits" : "  DOES NOT FIT", " in ",
                      HumanBytes(device_memory_bytes));
      if (!r->devices.empty()) absl::StrAppend(&out, " (its device blocks: ", HumanBytes(r->device_bytes), ")");
    }
    if (!r->devices.empty()) {
      absl::StrAppend(&out, "\n    per device:");
      for (const DeviceBytes& d : r->devices) {
        absl::StrAppend(&out, " ", d.device, " planned blocks ", HumanBytes(d.planned_bytes), " (without reuse ",
                        HumanBytes(d.naive_bytes), ");");
      }
    }
    absl::StrAppend(&out, "\n    by owner:");
    for (const auto& [category, bytes] : r->bytes_by_category) absl::StrAppend(&out, " ", category, " ", HumanBytes(bytes), ";");
    absl::StrAppend(&out, "\n    largest registers:");
    for (const RegisterUse& u : r->largest) absl::StrAppend(&out, " ", u.name, " ", HumanBytes(u.bytes), " (", u.category, ");");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string MemoryJson(const PlanSummary& s, int64_t device_memory_bytes) {
  std::vector<std::string> ranks;
  for (const RankReport& r : s.ranks) {
    std::vector<std::string> cats, largest;
    for (const auto& [category, bytes] : r.bytes_by_category) cats.push_back(absl::StrCat(Quote(category), ":", bytes));
    for (const RegisterUse& u : r.largest) {
      largest.push_back(absl::StrFormat("{\"name\":%s,\"category\":%s,\"bytes\":%d}", Quote(u.name), Quote(u.category), u.bytes));
    }
    ranks.push_back(absl::StrFormat(
        "{\"rank\":%d,\"planned_bytes\":%d,\"block_bytes\":%d,\"staging_bytes\":%d,\"persistent_bytes\":%d,"
        "\"naive_bytes\":%d,\"device_bytes\":%d,\"fits\":%s,\"by_owner\":{%s},\"largest\":[%s]%s}",
        r.rank, r.planned_bytes, r.block_bytes, r.staging_bytes, r.persistent_bytes, r.naive_bytes, r.device_bytes,
        device_memory_bytes <= 0 ? "null" : (r.device_bytes <= device_memory_bytes ? "true" : "false"),
        absl::StrJoin(cats, ","), absl::StrJoin(largest, ","), DevicesJson(r.devices)));
  }
  return absl::StrFormat("{\"job\":%s,\"device_memory_bytes\":%d,\"peak_bytes\":%d,\"ranks\":[%s]}\n", Quote(s.job_name),
                         device_memory_bytes, s.peak_bytes, absl::StrJoin(ranks, ","));
}

std::string SbpText(const std::vector<SbpDecision>& decisions, const std::string& only_op) {
  std::string out;
  for (const SbpDecision& d : decisions) {
    if (!only_op.empty() && d.op_name != only_op) continue;
    absl::StrAppendFormat(&out, "%s (%s): %d candidates\n", d.op_name, d.op_type, d.candidates.size());
    for (const SbpCandidate& c : d.candidates) {
      if (only_op.empty() && !c.chosen) continue;  // all ops: the chosen one; --op: every candidate
      absl::StrAppendFormat(&out, "  %s in %s -> out %s  total %s (compute %s, comm %s)%s\n", c.chosen ? "*" : " ",
                            absl::StrJoin(c.inputs, ", "), absl::StrJoin(c.outputs, ", "), Seconds(c.total_seconds),
                            Seconds(c.compute_seconds), Seconds(c.comm_seconds),
                            c.rejected_reason.empty() ? "" : "  rejected: " + c.rejected_reason);
      for (const std::string& comm : c.comm) absl::StrAppend(&out, "      ", comm, "\n");
    }
  }
  if (!only_op.empty() && out.empty()) return "";
  return out;
}

std::string SbpJson(const std::vector<SbpDecision>& decisions, const std::string& only_op) {
  std::vector<std::string> ops;
  for (const SbpDecision& d : decisions) {
    if (!only_op.empty() && d.op_name != only_op) continue;
    std::vector<std::string> cands;
    for (const SbpCandidate& c : d.candidates) {
      std::vector<std::string> ins, outs, comm;
      for (const std::string& s : c.inputs) ins.push_back(Quote(s));
      for (const std::string& s : c.outputs) outs.push_back(Quote(s));
      for (const std::string& s : c.comm) comm.push_back(Quote(s));
      cands.push_back(absl::StrFormat(
          "{\"chosen\":%s,\"inputs\":[%s],\"outputs\":[%s],\"compute_seconds\":%.9g,\"comm_seconds\":%.9g,"
          "\"total_seconds\":%.9g,\"boxing\":[%s],\"rejected_reason\":%s}",
          c.chosen ? "true" : "false", absl::StrJoin(ins, ","), absl::StrJoin(outs, ","), c.compute_seconds, c.comm_seconds,
          c.total_seconds, absl::StrJoin(comm, ","), Quote(c.rejected_reason)));
    }
    ops.push_back(absl::StrFormat("{\"op\":%s,\"type\":%s,\"candidates\":[%s]}", Quote(d.op_name), Quote(d.op_type),
                                  absl::StrJoin(cands, ",")));
  }
  return absl::StrCat("{\"ops\":[", absl::StrJoin(ops, ","), "]}\n");
}

std::string BoxingText(const std::vector<BoxingEntry>& entries) {
  std::string out = absl::StrFormat("%d boxing transform(s):\n", entries.size());
  double bytes = 0, seconds = 0;
  for (const BoxingEntry& e : entries) {
    absl::StrAppendFormat(&out, "  %s %s: %s -> %s  %s  %s per device  %s%s\n", e.op_name,
                          e.input < 0 ? std::string("update") : absl::StrCat("input ", e.input), e.from, e.to,
                          e.pattern, HumanBytes(e.bytes), Seconds(e.seconds),
                          e.also_read_by.empty()
                              ? std::string()
                              : absl::StrCat("  (", e.tensor, ", also read by ", absl::StrJoin(e.also_read_by, ", "), ")"));
    bytes += e.bytes;
    seconds += e.seconds;
  }
  absl::StrAppendFormat(&out, "  total: %s per device per firing, %s\n", HumanBytes(bytes), Seconds(seconds));
  return out;
}

std::string BoxingJson(const std::vector<BoxingEntry>& entries) {
  std::vector<std::string> rows;
  for (const BoxingEntry& e : entries) {
    std::vector<std::string> readers;
    for (const std::string& r : e.also_read_by) readers.push_back(Quote(r));
    rows.push_back(absl::StrFormat(
        "{\"op\":%s,\"input\":%d,\"tensor\":%s,\"from\":%s,\"to\":%s,\"pattern\":%s,\"bytes\":%.9g,\"seconds\":%.9g,"
        "\"also_read_by\":[%s]}",
        Quote(e.op_name), e.input, Quote(e.tensor), Quote(e.from), Quote(e.to), Quote(e.pattern), e.bytes, e.seconds,
        absl::StrJoin(readers, ",")));
  }
  return absl::StrCat("{\"boxing\":[", absl::StrJoin(rows, ","), "]}\n");
}

namespace {

struct DiffData {
  std::vector<std::tuple<std::string, std::string, std::string>> sbp_changed;  // op, A, B
  std::vector<std::string> ops_only_a, ops_only_b;
  std::vector<BoxingEntry> boxing_added, boxing_removed;
  PlanSummary a, b;
};

std::string Signature(const SbpDecision& d) {
  for (const SbpCandidate& c : d.candidates) {
    if (c.chosen) return absl::StrCat("in ", absl::StrJoin(c.inputs, ", "), " -> out ", absl::StrJoin(c.outputs, ", "));
  }
  return "?";
}

DiffData Diff(const PlanProto& pa, const PlanProto& pb, const ReportOptions& options) {
  DiffData d;
  d.a = Summarize(pa, options).value_or(PlanSummary{});
  d.b = Summarize(pb, options).value_or(PlanSummary{});
  std::map<std::string, std::string> sa, sb;
  for (const SbpDecision& x : SbpDecisions(pa)) sa[x.op_name] = Signature(x);
  for (const SbpDecision& x : SbpDecisions(pb)) sb[x.op_name] = Signature(x);
  for (const auto& [op, sig] : sa) {
    auto it = sb.find(op);
    if (it == sb.end()) {
      d.ops_only_a.push_back(op);
    } else if (it->second != sig) {
      d.sbp_changed.emplace_back(op, sig, it->second);
    }
  }
  for (const auto& [op, sig] : sb) {
    if (!sa.count(op)) d.ops_only_b.push_back(op);
  }
  auto key = [](const BoxingEntry& e) { return absl::StrCat(e.op_name, "#", e.input, "#", e.from, "#", e.to, "#", e.pattern); };
  std::map<std::string, BoxingEntry> ba, bb;
  for (const BoxingEntry& e : BoxingEntries(pa)) ba[key(e)] = e;
  for (const BoxingEntry& e : BoxingEntries(pb)) bb[key(e)] = e;
  for (const auto& [k, e] : ba) if (!bb.count(k)) d.boxing_removed.push_back(e);
  for (const auto& [k, e] : bb) if (!ba.count(k)) d.boxing_added.push_back(e);
  return d;
}

double BoxBytes(const std::vector<BoxingEntry>& v) {
  double t = 0;
  for (const BoxingEntry& e : v) t += e.bytes;
  return t;
}

}  // namespace

std::string DiffText(const PlanProto& pa, const PlanProto& pb, const ReportOptions& options) {
  DiffData d = Diff(pa, pb, options);
  std::string out = absl::StrFormat("plan A '%s' %s  vs  plan B '%s' %s\n", d.a.job_name, d.a.hash, d.b.job_name, d.b.hash);
  if (d.a.hash == d.b.hash) return out + "  identical plans\n";
  auto line = [&](const std::string& what, const std::string& x, const std::string& y) {
    if (x != y) absl::StrAppend(&out, "  ", what, ": ", x, " -> ", y, "\n");
  };
  line("world", absl::StrCat(d.a.world_size), absl::StrCat(d.b.world_size));
  line("placements", absl::StrJoin(d.a.placements, "; "), absl::StrJoin(d.b.placements, "; "));
  line("pieces per step", absl::StrCat(d.a.pieces_per_step), absl::StrCat(d.b.pieces_per_step));
  line("tasks", absl::StrCat(d.a.tasks), absl::StrCat(d.b.tasks));
  line("registers", absl::StrCat(d.a.registers), absl::StrCat(d.b.registers));
  line("moved per step", HumanBytes(d.a.bytes_per_step), HumanBytes(d.b.bytes_per_step));
  std::set<std::string> links;
  for (const auto& [k, v] : d.a.bytes_by_link) links.insert(k);
  for (const auto& [k, v] : d.b.bytes_by_link) links.insert(k);
  for (const std::string& k : links) {
    auto ga = d.a.bytes_by_link.find(k), gb = d.b.bytes_by_link.find(k);
    line("  " + k, HumanBytes(ga == d.a.bytes_by_link.end() ? 0 : ga->second), HumanBytes(gb == d.b.bytes_by_link.end() ? 0 : gb->second));
  }
  line("planned peak memory", HumanBytes(d.a.peak_bytes), HumanBytes(d.b.peak_bytes));
  std::map<int32_t, std::pair<int64_t, int64_t>> per_rank;
  for (const RankReport& r : d.a.ranks) per_rank[r.rank].first = r.planned_bytes;
  for (const RankReport& r : d.b.ranks) per_rank[r.rank].second = r.planned_bytes;
  int shown = 0;
  for (const auto& [rank, ab] : per_rank) {
    if (ab.first != ab.second && shown++ < 8) line(absl::StrCat("  rank ", rank, " peak"), HumanBytes(ab.first), HumanBytes(ab.second));
  }
  line("serial estimate", Seconds(d.a.serial_estimate_seconds), Seconds(d.b.serial_estimate_seconds));
  absl::StrAppendFormat(&out, "  SBP changed on %d op(s)%s\n", d.sbp_changed.size(), d.sbp_changed.empty() ? "" : ":");
  for (size_t i = 0; i < d.sbp_changed.size() && i < 20; ++i) {
    const auto& [op, x, y] = d.sbp_changed[i];
    absl::StrAppend(&out, "    ", op, ": ", x, "  ->  ", y, "\n");
  }
  if (d.sbp_changed.size() > 20) absl::StrAppend(&out, "    ... (--json lists all)\n");
  if (!d.ops_only_a.empty()) absl::StrAppend(&out, "  ops only in A: ", absl::StrJoin(d.ops_only_a, ", "), "\n");
  if (!d.ops_only_b.empty()) absl::StrAppend(&out, "  ops only in B: ", absl::StrJoin(d.ops_only_b, ", "), "\n");
  absl::StrAppendFormat(&out, "  boxing removed: %d (%s per device per firing)\n", d.boxing_removed.size(), HumanBytes(BoxBytes(d.boxing_removed)));
  for (const BoxingEntry& e : d.boxing_removed) {
    absl::StrAppend(&out, "    - ", e.op_name, " in", e.input, " ", e.from, " -> ", e.to, " ", e.pattern, " ", HumanBytes(e.bytes), "\n");
  }
  absl::StrAppendFormat(&out, "  boxing added: %d (%s per device per firing)\n", d.boxing_added.size(), HumanBytes(BoxBytes(d.boxing_added)));
  for (const BoxingEntry& e : d.boxing_added) {
    absl::StrAppend(&out, "    + ", e.op_name, " in", e.input, " ", e.from, " -> ", e.to, " ", e.pattern, " ", HumanBytes(e.bytes), "\n");
  }
  return out;
}

std::string DiffJson(const PlanProto& pa, const PlanProto& pb, const ReportOptions& options) {
  DiffData d = Diff(pa, pb, options);
  std::vector<std::string> sbp, added, removed;
  for (const auto& [op, x, y] : d.sbp_changed) {
    sbp.push_back(absl::StrFormat("{\"op\":%s,\"a\":%s,\"b\":%s}", Quote(op), Quote(x), Quote(y)));
  }
  auto box = [](const BoxingEntry& e) {
    return absl::StrFormat("{\"op\":%s,\"input\":%d,\"from\":%s,\"to\":%s,\"pattern\":%s,\"bytes\":%.9g}", Quote(e.op_name),
                           e.input, Quote(e.from), Quote(e.to), Quote(e.pattern), e.bytes);
  };
  for (const BoxingEntry& e : d.boxing_added) added.push_back(box(e));
  for (const BoxingEntry& e : d.boxing_removed) removed.push_back(box(e));
  std::string a = SummaryJson(d.a), b = SummaryJson(d.b);
  a.pop_back();
  b.pop_back();
  return absl::StrFormat("{\"identical\":%s,\"sbp_changed\":[%s],\"boxing_added\":[%s],\"boxing_removed\":[%s],\"a\":%s,\"b\":%s}\n",
                         d.a.hash == d.b.hash ? "true" : "false", absl::StrJoin(sbp, ","), absl::StrJoin(added, ","),
                         absl::StrJoin(removed, ","), a, b);
}

}  // namespace plan_tool
}  // namespace oneflow_like
