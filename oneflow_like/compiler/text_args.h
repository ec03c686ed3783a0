// Internal to the text format: turns the generic values of text_value.h into the typed values
// the parser needs (call arguments bound to parameter names, numbers, attrs, SBPs,
// initializers, optimizers), with errors that point at the offending value. Not a public API.
#ifndef ONEFLOW_LIKE_COMPILER_TEXT_ARGS_H_
#define ONEFLOW_LIKE_COMPILER_TEXT_ARGS_H_

#include <map>
#include <string>
#include <vector>

#include "oneflow_like/compiler/text_value.h"
#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/proto/job.pb.h"
#include "oneflow_like/core/sbp.h"

namespace oneflow_like {
namespace compiler {
namespace text_internal {

// Binds the arguments of `call` to `params`: positional ones in order, then key=value.
// Returns one entry per param (nullptr = not given). Unknown or repeated names are errors.
absl::StatusOr<std::vector<const TextValue*>> Bind(const LineScanner& s, const TextValue& call,
                                                   const std::vector<std::string>& params);

// Typed reads of one value; `what` names it in the error.
absl::StatusOr<double> AsDouble(const LineScanner& s, const TextValue& v, absl::string_view what);
absl::StatusOr<int64_t> AsInt(const LineScanner& s, const TextValue& v, absl::string_view what, int64_t min);
absl::StatusOr<bool> AsBool(const LineScanner& s, const TextValue& v, absl::string_view what);
absl::StatusOr<std::string> AsName(const LineScanner& s, const TextValue& v, absl::string_view what);
absl::StatusOr<DataType> AsDataType(const LineScanner& s, const TextValue& v);

// An op attribute from `key=value` (v.key names it): int, float, bool, "string", a dtype name,
// a list of ints (all integers) or of floats (any float among them).
absl::StatusOr<AttrValue> ToAttrValue(const LineScanner& s, const TextValue& v);

// The NdSbp spelled `text` ("[S(0), B]"), found at `column` in option `key`.
absl::StatusOr<NdSbp> ParseSbpText(const LineScanner& s, int column, absl::string_view text, absl::string_view key);
// "[[S(0)], _, [B]]": one entry per input/output (`what`), `_` = free; returns the pins by index.
absl::StatusOr<std::map<int, NdSbp>> ParsePinList(const LineScanner& s, const std::string& key, int column,
                                                  const std::string& raw, int count, absl::string_view what);

// zeros | ones | constant(v) | uniform(low, high) | normal(std[, mean]), each with seed=.
absl::StatusOr<InitializerProto> ParseInitializer(const LineScanner& s, const TextValue& v);
// sgd(lr, weight_decay=, momentum=) | adam(...) | adamw(lr, weight_decay=, beta1=, beta2=,
// epsilon=, bias_correction=).
absl::StatusOr<OptimizerProto> ParseOptimizer(const LineScanner& s, const TextValue& v);

}  // namespace text_internal
}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_TEXT_ARGS_H_
