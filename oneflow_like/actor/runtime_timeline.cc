// Runtime: the recorded timeline (acts, waits, remote sends and receives) as Chrome trace
// events, and WriteRankTimeline. See TimelineEvents() in runtime.h for the event shapes.
#include <fstream>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/actor/runtime.h"

namespace oneflow_like {
namespace actor {
namespace {

// Rows (tids) of one rank's trace: stream threads are 0..threads-1, then these.
constexpr int64_t kReceiveRowBase = 10000;  // + peer rank: receives from that rank
constexpr int64_t kWaitRowBase = 20000;     // + actor id: that actor's waits

// `text` as a JSON string literal (quotes included).
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string RemoteKindName(RemoteKind kind) {
  switch (kind) {
    case RemoteKind::kReady:
      return "ready";
    case RemoteKind::kReturned:
      return "returned";
    case RemoteKind::kEndOfData:
      return "end of data";
  }
  return "unknown";
}

std::string ThreadName(int64_t pid, int64_t tid, absl::string_view name) {
  return absl::StrCat(R"({"name":"thread_name","ph":"M","pid":)", pid, R"(,"tid":)", tid, R"(,"args":{"name":)",
                      JsonString(name), "}}");
}

}  // namespace

void Runtime::RecordTimelineEvent(TimelineEvent event) {
  std::lock_guard<std::mutex> lock(timeline_mu_);
  if (event.kind == TimelineEvent::kSend || event.kind == TimelineEvent::kReceive) {
    auto& counts = event.kind == TimelineEvent::kSend ? sent_count_ : received_count_;
    event.sequence =
        counts[std::make_tuple(event.peer, static_cast<int>(event.remote_kind), event.register_id)]++;
  }
  timeline_.push_back(std::move(event));
}

void Runtime::OnWaited(const Actor& actor, const WaitCause& cause, int64_t begin_micros, int64_t end_micros) {
  if (!env_.record_timeline) return;
  TimelineEvent event;
  event.kind = TimelineEvent::kWait;
  event.actor = actor.spec().id;
  event.cause = cause;
  event.begin_micros = begin_micros;
  event.end_micros = end_micros;
  RecordTimelineEvent(std::move(event));
}

std::string Runtime::TimelineEvents() const {
  if (!env_.record_timeline) return "";
  const int64_t pid = rank_.value();
  std::vector<std::string> events;
  events.push_back(absl::StrCat(R"({"name":"process_name","ph":"M","pid":)", pid, R"(,"args":{"name":"rank )", pid,
                                R"("}})"));
  for (size_t t = 0; t < threads_.size(); ++t) events.push_back(ThreadName(pid, t, threads_[t]->name));
  std::lock_guard<std::mutex> lock(timeline_mu_);
  std::set<int64_t> extra_rows;  // receive and wait rows that have events
  for (const TimelineEvent& e : timeline_) {
    const int64_t tid = e.kind == TimelineEvent::kReceive ? kReceiveRowBase + e.peer
                        : e.kind == TimelineEvent::kWait  ? kWaitRowBase + e.actor.value()
                                                          : e.tid;
    const std::string common = absl::StrCat(R"("ph":"X","ts":)", e.begin_micros, R"(,"dur":)",
                                            e.end_micros - e.begin_micros, R"(,"pid":)", pid, R"(,"tid":)", tid);
    switch (e.kind) {
      case TimelineEvent::kAct: {
        const ActorSpec& spec = actors_[e.actor.value()]->spec();
        events.push_back(absl::StrCat(R"({"name":)", JsonString(spec.name), R"(,"cat":)", JsonString(spec.type_name),
                                      ",", common, R"(,"args":{"task":)", spec.task.value(), R"(,"firing":)", e.firing,
                                      "}}"));
        break;
      }
      case TimelineEvent::kWait: {
        const ActorSpec& spec = actors_[e.actor.value()]->spec();
        extra_rows.insert(tid);
        events.push_back(absl::StrCat(R"({"name":)", JsonString(absl::StrCat("wait: ", WaitCauseName(e.cause))),
                                      R"(,"cat":"wait",)", common, R"(,"args":{"task":)", spec.task.value(),
                                      R"(,"waits_for":)", JsonString(WaitCauseName(e.cause)), "}}"));
        break;
      }
      case TimelineEvent::kSend:
      case TimelineEvent::kReceive: {
        const bool send = e.kind == TimelineEvent::kSend;
        if (!send) extra_rows.insert(tid);
        auto layout = layout_by_id_.find(e.register_id);
        auto mirror = mirror_by_id_.find(e.register_id);
        const std::string register_name = layout != layout_by_id_.end()   ? layout->second->name
                                          : mirror != mirror_by_id_.end() ? mirror->second->layout.name
                                                                          : absl::StrCat("#", e.register_id);
        const std::string name =
            absl::StrCat(send ? "send " : "receive ", RemoteKindName(e.remote_kind), " '", register_name, "'");
        events.push_back(absl::StrCat(R"({"name":)", JsonString(name), R"(,"cat":"transfer",)", common,
                                      R"(,"args":{"register":)", e.register_id, R"(,"buffer":)", e.buffer,
                                      R"(,"peer":)", e.peer, R"(,"bytes":)", e.bytes, "}}"));
        const int64_t from = send ? pid : e.peer, to = send ? e.peer : pid;
        const std::string flow_id = absl::StrCat(from, ">", to, ":", static_cast<int>(e.remote_kind), ":",
                                                 e.register_id, ":", e.sequence);
        events.push_back(absl::StrCat(R"({"name":"message","cat":"transfer","ph":")", send ? "s" : "f",
                                      send ? "" : R"(","bp":"e)", R"(","id":)", JsonString(flow_id), R"(,"ts":)",
                                      e.begin_micros, R"(,"pid":)", pid, R"(,"tid":)", tid, "}"));
        break;
      }
    }
  }
  for (const int64_t row : extra_rows) {
    const std::string name =
        row >= kWaitRowBase
            ? absl::StrCat("waits of '", actors_[row - kWaitRowBase]->spec().name, "'")
            : absl::StrCat("receives from rank ", row - kReceiveRowBase);
    events.push_back(ThreadName(pid, row, name));
  }
  return absl::StrJoin(events, ",\n");
}

absl::Status WriteRankTimeline(const Runtime& runtime, const std::string& path) {
  if (!runtime.records_timeline()) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", runtime.rank().value(),
                                                      " records no timeline (set RuntimeEnv.record_timeline)"));
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot open timeline file '", path, "' for writing"));
  file << "{\"traceEvents\": [\n" << runtime.TimelineEvents() << "\n]}\n";
  file.close();
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot write timeline file '", path, "'"));
  return absl::OkStatus();
}

}  // namespace actor
}  // namespace oneflow_like
