#include "oneflow_like/compiler/text_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oneflow_like {
namespace compiler {
namespace text_internal {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/';
}
bool IsReservedWord(absl::string_view s) {
  return s == "true" || s == "false" || s == "inf" || s == "nan" || s == "_";
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string TextValue::Describe() const {
  switch (kind) {
    case Kind::kInt: return absl::StrCat(i);
    case Kind::kFloat: return FormatDouble(f);
    case Kind::kBool: return b ? "true" : "false";
    case Kind::kString: return QuoteString(text);
    case Kind::kName: return text;
    case Kind::kList: return "[...]";
    case Kind::kCall: return absl::StrCat(text, "(...)");
    case Kind::kPlacement: return text;
  }
  return "?";
}

// ---- LineScanner ----

void LineScanner::SkipSpace() {
  while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t')) ++pos_;
}

bool LineScanner::AtEnd() {
  SkipSpace();
  return pos_ >= line_.size() || line_[pos_] == '#';
}

char LineScanner::Peek() { return AtEnd() ? 0 : line_[pos_]; }

bool LineScanner::TryConsume(char c) {
  if (Peek() != c || c == 0) return false;
  ++pos_;
  return true;
}

absl::Status LineScanner::Expect(char c, absl::string_view after) {
  if (TryConsume(c)) return absl::OkStatus();
  std::string found = AtEnd() ? "the end of the line" : absl::StrCat("'", line_.substr(pos_, 1), "'");
  return Error(column(), absl::StrCat("expected '", std::string(1, c), "' ", after, ", found ", found));
}

absl::StatusOr<std::string> LineScanner::Name(absl::string_view what) {
  const char c = Peek();
  const int col = column();
  if (c == '"') {
    ASSIGN_OR_RETURN(TextValue v, Value());
    if (v.text.empty()) return Error(col, absl::StrCat("empty name where ", what, " was expected"));
    return v.text;
  }
  if (!IsNameStart(c)) {
    std::string found = AtEnd() ? "the end of the line" : absl::StrCat("'", line_.substr(pos_, 1), "'");
    return Error(col, absl::StrCat("expected ", what, ", found ", found));
  }
  size_t start = pos_;
  while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
  return std::string(line_.substr(start, pos_ - start));
}

absl::StatusOr<TextValue> LineScanner::Number() {
  TextValue v;
  v.column = column();
  size_t start = pos_;
  bool is_float = false;
  if (line_[pos_] == '+' || line_[pos_] == '-') ++pos_;
  if (pos_ < line_.size() && IsNameStart(line_[pos_])) {  // -inf, +inf
    size_t word = pos_;
    while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
    if (line_.substr(word, pos_ - word) != "inf") {
      return Error(v.column, absl::StrCat("bad number '", line_.substr(start, pos_ - start), "'"));
    }
    v.kind = TextValue::Kind::kFloat;
    v.f = line_[start] == '-' ? -HUGE_VAL : HUGE_VAL;
    return v;
  }
  while (pos_ < line_.size()) {
    char c = line_[pos_];
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      ++pos_;
    } else if (c == '.') {
      is_float = true;
      ++pos_;
    } else if ((c == 'e' || c == 'E') && pos_ > start) {
      is_float = true;
      ++pos_;
      if (pos_ < line_.size() && (line_[pos_] == '+' || line_[pos_] == '-')) ++pos_;
    } else {
      break;
    }
  }
  absl::string_view text = line_.substr(start, pos_ - start);
  if (pos_ < line_.size() && IsNameChar(line_[pos_])) {
    while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
    return Error(v.column, absl::StrCat("bad number '", line_.substr(start, pos_ - start), "'"));
  }
  if (is_float) {
    v.kind = TextValue::Kind::kFloat;
    if (!absl::SimpleAtod(text, &v.f)) return Error(v.column, absl::StrCat("bad number '", text, "'"));
  } else {
    v.kind = TextValue::Kind::kInt;
    if (!absl::SimpleAtoi(text, &v.i)) {
      return Error(v.column, absl::StrCat("bad integer '", text, "'"), "integers must fit in 64 bits");
    }
  }
  return v;
}

absl::StatusOr<TextValue> LineScanner::Value() {
  const char c = Peek();
  TextValue v;
  v.column = column();
  if (c == '"') {
    ++pos_;
    v.kind = TextValue::Kind::kString;
    while (true) {
      if (pos_ >= line_.size()) return Error(v.column, "unterminated string", "close it with '\"'");
      char d = line_[pos_++];
      if (d == '"') break;
      if (d == '\\' && pos_ < line_.size()) {
        char e = line_[pos_++];
        v.text.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
      } else {
        v.text.push_back(d);
      }
    }
    return v;
  }
  if (c == '[') {
    ++pos_;
    v.kind = TextValue::Kind::kList;
    if (TryConsume(']')) return v;
    while (true) {
      ASSIGN_OR_RETURN(TextValue item, Value());
      v.items.push_back(std::move(item));
      if (TryConsume(']')) return v;
      RETURN_IF_ERROR(Expect(',', "between list items"));
    }
  }
  if (c == '-' || c == '+' || c == '.' || absl::ascii_isdigit(static_cast<unsigned char>(c))) return Number();
  if (IsNameStart(c)) {
    ASSIGN_OR_RETURN(v.text, Name("a value"));
    if (v.text == "true" || v.text == "false") {
      v.kind = TextValue::Kind::kBool;
      v.b = v.text == "true";
    } else if (v.text == "inf" || v.text == "nan") {
      v.kind = TextValue::Kind::kFloat;
      v.f = v.text == "inf" ? HUGE_VAL : std::nan("");
    } else if (pos_ < line_.size() && line_[pos_] == '(') {
      ++pos_;
      v.kind = TextValue::Kind::kCall;
      ASSIGN_OR_RETURN(v.items, CallArgs());
    } else if (pos_ < line_.size() && line_[pos_] == ':') {
      PlacementTail(&v);
    }
    return v;
  }
  if (AtEnd()) return Error(column(), "expected a value, found the end of the line");
  return Error(column(), absl::StrCat("expected a value, found '", line_.substr(pos_, 1), "'"),
               "values are numbers, true/false, \"strings\", names, [lists] or calls like normal(0.02)");
}

void LineScanner::PlacementTail(TextValue* v) {
  v->kind = TextValue::Kind::kPlacement;
  const size_t start = pos_++;  // the ':'
  int depth = 0;
  while (pos_ < line_.size()) {
    const char c = line_[pos_];
    if (c == '[') {
      ++depth;
    } else if (c == ']') {
      if (depth == 0) break;
      --depth;
    } else if (depth == 0 && !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-') {
      break;
    }
    ++pos_;
    if (depth == 0 && c == ']') break;
  }
  absl::StrAppend(&v->text, line_.substr(start, pos_ - start));
}

absl::StatusOr<std::vector<TextValue>> LineScanner::CallArgs() {
  std::vector<TextValue> args;
  if (TryConsume(')')) return args;
  while (true) {
    // key=value or a positional value. A key is a plain name directly followed by '='.
    SkipSpace();
    size_t save = pos_;
    std::string key;
    int key_column = column();
    if (pos_ < line_.size() && IsNameStart(line_[pos_])) {
      while (pos_ < line_.size() && IsNameChar(line_[pos_])) ++pos_;
      key = std::string(line_.substr(save, pos_ - save));
      if (!TryConsume('=')) {
        key.clear();
        pos_ = save;
      }
    }
    ASSIGN_OR_RETURN(TextValue value, Value());
    value.key = std::move(key);
    value.key_column = key_column;
    args.push_back(std::move(value));
    if (TryConsume(')')) return args;
    RETURN_IF_ERROR(Expect(',', "between arguments"));
  }
}

std::string LineScanner::Span() {
  SkipSpace();
  size_t start = pos_;
  int depth = 0;
  while (pos_ < line_.size()) {
    char c = line_[pos_];
    if (depth == 0 && (c == ' ' || c == '\t' || c == '#')) break;
    if (c == '[' || c == '(') ++depth;
    if ((c == ']' || c == ')') && depth > 0) --depth;
    ++pos_;
  }
  return std::string(line_.substr(start, pos_ - start));
}

absl::Status LineScanner::Error(int column, absl::string_view message, absl::string_view hint) const {
  std::string caret(std::max(0, column - 1), ' ');
  for (int i = 0; i < column - 1 && i < static_cast<int>(line_.size()); ++i) {
    if (line_[i] == '\t') caret[i] = '\t';
  }
  return absl::InvalidArgumentError(absl::StrCat("line ", line_number_, ":", column, ": ", message,
                                                 hint.empty() ? "" : absl::StrCat(" (hint: ", hint, ")"),
                                                 "\n  ", line_, "\n  ", caret, "^"));
}

// ---- Spelling helpers ----

bool IsPlainName(absl::string_view name) {
  if (name.empty() || !IsNameStart(name[0]) || IsReservedWord(name)) return false;
  return std::all_of(name.begin(), name.end(), IsNameChar);
}

std::string NameText(absl::string_view name) { return IsPlainName(name) ? std::string(name) : QuoteString(name); }

std::string QuoteString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string FormatDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string out(buf);
  // "1e-06" -> "1e-6", "1e+20" -> "1e20".
  const size_t e = out.find('e');
  if (e != std::string::npos) {
    std::string exponent = out.substr(e + 1);
    const bool negative = exponent[0] == '-';
    exponent = exponent.substr(exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
    exponent = exponent.substr(std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
    out = absl::StrCat(out.substr(0, e), "e", negative ? "-" : "", exponent);
  }
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

absl::StatusOr<std::vector<std::string>> SplitBracketedList(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') {
    return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not a bracketed list [..., ...]"));
  }
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 1;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c == '[' || c == '(') ++depth;
    if (c == ']' || c == ')') {
      if (--depth < 0) return absl::InvalidArgumentError(absl::StrCat("unbalanced brackets in '", s, "'"));
    }
    if (c == ',' && depth == 0) {
      parts.emplace_back(absl::StripAsciiWhitespace(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return absl::InvalidArgumentError(absl::StrCat("unbalanced brackets in '", s, "'"));
  absl::string_view last = absl::StripAsciiWhitespace(s.substr(start, s.size() - 1 - start));
  if (!last.empty() || !parts.empty()) parts.emplace_back(last);
  return parts;
}

std::vector<std::string> Suggest(absl::string_view name, const std::vector<std::string>& candidates) {
  const size_t limit = std::max<size_t>(1, name.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(name, c);
    const bool prefix = name.size() >= 3 && (absl::StartsWith(c, name) || absl::StartsWith(name, c));
    if (d <= limit || prefix) scored.emplace_back(prefix ? std::min(d, limit) : d, c);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out.push_back(scored[i].second);
  return out;
}

std::string DidYouMean(absl::string_view name, const std::vector<std::string>& candidates) {
  std::vector<std::string> close = Suggest(name, candidates);
  return close.empty() ? "" : absl::StrCat("did you mean ", absl::StrJoin(close, ", "), "?");
}

}  // namespace text_internal
}  // namespace compiler
}  // namespace oneflow_like
