// Internal to the text format (text_format.h): a scanner over one line of text, the generic
// values it reads (numbers, strings, names, [lists], calls like normal(0.02, seed=3)), and
// spelling helpers shared by the parser and the printer. Not a public API.
#ifndef ONEFLOW_LIKE_COMPILER_TEXT_VALUE_H_
#define ONEFLOW_LIKE_COMPILER_TEXT_VALUE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {
namespace text_internal {

// A value as written: 3, -1.5e-3, inf, true, "gelu", name, [1, 2], normal(0.02, seed=3),
// cpu:[0,1] (a placement: `text` holds it verbatim for Placement::Parse).
struct TextValue {
  enum class Kind { kInt, kFloat, kBool, kString, kName, kList, kCall, kPlacement };
  Kind kind = Kind::kName;
  int column = 0;                // 1-based column where the value starts
  int64_t i = 0;                 // kInt
  double f = 0;                  // kFloat
  bool b = false;                // kBool
  std::string text;              // kString contents, kName, kCall callee, kPlacement text
  std::vector<TextValue> items;  // kList items, kCall arguments
  std::string key;               // as a call argument: its "key=", empty if positional
  int key_column = 0;

  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  double number() const { return kind == Kind::kInt ? static_cast<double>(i) : f; }
  // A short rendering for error messages ("[1,2]", "normal(...)", "\"gelu\"").
  std::string Describe() const;
};

// Reads one line from left to right. Columns are 1-based. `#` outside a string starts a
// comment that runs to the end of the line.
class LineScanner {
 public:
  LineScanner(absl::string_view line, int line_number) : line_(line), line_number_(line_number) {}

  void SkipSpace();
  // True at the end of the line or at a comment (after skipping spaces).
  bool AtEnd();
  // The next character (after skipping spaces), or 0 at the end.
  char Peek();
  // Skips spaces; consumes `c` if it is next.
  bool TryConsume(char c);
  // Like TryConsume, but an error ("expected ')' after ...") if `c` is not next.
  absl::Status Expect(char c, absl::string_view after);
  int column() const { return static_cast<int>(pos_) + 1; }

  // An identifier ([A-Za-z_][A-Za-z0-9_./]*) or a "quoted string"; `what` names the expected
  // thing in the error.
  absl::StatusOr<std::string> Name(absl::string_view what);
  absl::StatusOr<TextValue> Value();
  // Call arguments after '(' up to and including ')'.
  absl::StatusOr<std::vector<TextValue>> CallArgs();
  // Raw text up to the next space (or comment, or end) outside brackets: "cpu:[0, 1]",
  // "[S(0), B]". Empty if nothing is there.
  std::string Span();

  // InvalidArgument "line L:C: message (hint: hint)" followed by the line and a caret.
  absl::Status Error(int column, absl::string_view message, absl::string_view hint = "") const;
  int line_number() const { return line_number_; }

 private:
  absl::StatusOr<TextValue> Number();
  // After a name `v`, at ':': reads the rest of a placement ("cpu" + ":[0,1]" or ":0-3").
  void PlacementTail(TextValue* v);

  absl::string_view line_;
  int line_number_;
  size_t pos_ = 0;
};

// A name as the text format spells it: identifiers as they are, anything else (including the
// words true, false, inf, nan and _) in double quotes.
std::string NameText(absl::string_view name);
bool IsPlainName(absl::string_view name);
// "..." with \" \\ \n \t escaped.
std::string QuoteString(absl::string_view s);
// The shortest decimal that reads back as exactly `v`, always recognizable as a float
// ("1.0", "0.001", "1e+20", "inf", "-inf", "nan").
std::string FormatDouble(double v);
// Splits "[a, [b, c], d]"'s inside at top-level commas: {"a", "[b, c]", "d"} (trimmed).
// InvalidArgument when `text` is not one bracketed list or brackets do not balance.
absl::StatusOr<std::vector<std::string>> SplitBracketedList(absl::string_view text);
// Up to three of `candidates` closest to `name` (edit distance), best first; for hints.
std::vector<std::string> Suggest(absl::string_view name, const std::vector<std::string>& candidates);
// "did you mean a, b?" or "" when there is nothing close.
std::string DidYouMean(absl::string_view name, const std::vector<std::string>& candidates);

}  // namespace text_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_TEXT_VALUE_H_
