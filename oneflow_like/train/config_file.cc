#include "oneflow_like/train/config_file.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace train {
namespace {

// section -> field -> flag name. "" = handled specially.
const std::map<std::string, std::map<std::string, std::string>>& Fields() {
  static const auto* fields = new std::map<std::string, std::map<std::string, std::string>>{
      {"model",
       {{"kind", "--model"}, {"vocab", "--vocab"}, {"seq_len", "--seq_len"}, {"n_layer", "--n_layer"},
        {"n_embd", "--n_embd"}, {"n_head", "--n_head"}, {"init", "--init"}, {"gelu", "--gelu"},
        {"width", "--width"}, {"depth", "--depth"}}},
      {"data", {{"source", ""}, {"path", "--data"}, {"batch", "--batch"}, {"data_batches", "--data_batches"}}},
      {"parallel",
       {{"dp", "--dp"}, {"tp", "--tp"}, {"pp", "--pp"}, {"device", "--device"}, {"micro_batches", "--micro_batches"},
        {"grad_accum", "--grad_accum"}, {"zero_stage", "--zero_stage"}, {"boxing", "--boxing"}, {"bucket_mb", "--bucket_mb"},
        {"recompute", "--recompute"},
        {"reuse_memory", "--reuse_memory"}, {"inplace_updates", "--inplace_updates"},
        {"compute_streams", "--compute_streams"}, {"stream_ordered", "--stream_ordered"},
        {"order_collectives", "--order_collectives"}}},
      {"optimizer", {{"kind", ""}, {"lr", "--lr"}}},
      {"train",
       {{"steps", "--steps"}, {"warmup", "--warmup"}, {"seed", "--seed"}, {"watchdog_ms", "--watchdog_ms"},
        {"timeline", "--timeline"}, {"run_ahead", "--run_ahead"}}},
      {"checkpoint", {{"dir", "--checkpoint_dir"}, {"every", "--checkpoint_every"}, {"resume", "--resume"}}},
  };
  return *fields;
}

std::string Keys(const std::map<std::string, std::string>& fields) {
  std::vector<std::string> keys;
  for (const auto& [key, flag] : fields) keys.push_back(key);
  return absl::StrJoin(keys, ", ");
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ConfigToFlags(const std::string& text, const std::string& source) {
  std::vector<std::string> flags;
  std::istringstream lines(text);
  std::string line, section;
  std::set<std::string> seen;
  std::string data_source, optimizer_kind, model_kind = "mlp", data_path;
  int line_number = 0, optimizer_line = 0, source_line = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    const std::string where = absl::StrCat(source, ":", line_number, ": ");
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const std::string content(absl::StripAsciiWhitespace(line));
    if (content.empty()) continue;
    if (content.front() == '[') {
      if (content.back() != ']') return absl::InvalidArgumentError(absl::StrCat(where, "expected '[section]'"));
      section = std::string(absl::StripAsciiWhitespace(content.substr(1, content.size() - 2)));
      if (Fields().count(section) == 0) {
        std::vector<std::string> names;
        for (const auto& [name, fields] : Fields()) names.push_back(name);
        return absl::InvalidArgumentError(absl::StrCat(where, "unknown section [", section,
                                                       "]; known: ", absl::StrJoin(names, ", ")));
      }
      continue;
    }
    const size_t eq = content.find('=');
    if (eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, "expected 'field = value', got '", content, "'"));
    }
    if (section.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "a field before any [section]"));
    const std::string key(absl::StripAsciiWhitespace(content.substr(0, eq)));
    const std::string value(absl::StripAsciiWhitespace(content.substr(eq + 1)));
    const std::string field = absl::StrCat("[", section, "] ", key);
    const auto& fields = Fields().at(section);
    auto it = fields.find(key);
    if (it == fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(where, field, ": unknown field; the fields of [", section,
                                                     "] are: ", Keys(fields)));
    }
    if (!seen.insert(section + "." + key).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, field, ": given twice"));
    }
    if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(where, field, ": missing value"));
    if (section == "data" && key == "source") {
      if (value != "synthetic" && value != "text") {
        return absl::InvalidArgumentError(absl::StrCat(where, field, ": expected synthetic or text, got '", value, "'"));
      }
      data_source = value;
      source_line = line_number;
      continue;
    }
    if (section == "optimizer" && key == "kind") {
      optimizer_kind = value;
      optimizer_line = line_number;
      continue;
    }
    if (section == "model" && key == "kind") model_kind = value;
    if (section == "data" && key == "path") data_path = value;
    const std::string flag = absl::StrCat(it->second, "=", value);
    // Check the value alone, so the error names this line and field.
    absl::StatusOr<TrainerFlags> check = ParseTrainerFlags({flag});
    if (!check.ok()) {
      absl::string_view message = check.status().message();
      const std::string prefix = absl::StrCat(it->second, ": ");
      absl::ConsumePrefix(&message, prefix);
      absl::ConsumeSuffix(&message, " (see --help)");
      return absl::InvalidArgumentError(absl::StrCat(where, field, ": ", message));
    }
    flags.push_back(flag);
  }
  if (data_source == "text" && data_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", source_line, ": [data] source: 'text' needs [data] path = FILE"));
  }
  if (data_source == "synthetic" && !data_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", source_line,
                                                   ": [data] source: 'synthetic' takes no [data] path"));
  }
  if (!optimizer_kind.empty()) {
    const std::string expected = model_kind == "gpt" ? "adamw" : "sgd";
    if (optimizer_kind != expected) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", optimizer_line, ": [optimizer] kind: the ",
                                                     model_kind, " model trains with ", expected, ", got '",
                                                     optimizer_kind, "'"));
    }
  }
  return flags;
}

absl::StatusOr<TrainerFlags> ParseTrainerConfig(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream file(path);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("config '", path, "': cannot open the file"));
  std::ostringstream text;
  text << file.rdbuf();
  ASSIGN_OR_RETURN(std::vector<std::string> flags, ConfigToFlags(text.str(), path));
  flags.insert(flags.end(), overrides.begin(), overrides.end());
  ASSIGN_OR_RETURN(TrainerFlags parsed, ParseTrainerFlags(flags));
  parsed.config_path = path;
  return parsed;
}

}  // namespace train
}  // namespace oneflow_like
