// The text format of logical jobs, used in tests and docs. One statement per line; `#` starts
// a comment. A two-layer MLP trained with AdamW on 4 ranks:
//
//   config(name="mlp", micro_batches=4, seed=1)
//   x = input(shape=[64,128]) placement=cpu:[0,1,2,3] sbp=[S(0)]
//   label = input(shape=[64], dtype=int64) sbp=[S(0)]
//   w1 = variable(shape=[128,256], init=normal(0.02)) sbp=[B]
//   w2 = variable(shape=[256,10], init=uniform(-0.1, 0.1))
//   h = matmul(x, w1)
//   a = relu(h) stage=0
//   logits = matmul(a, w2, transpose_b=false) name=fc2
//   loss = sparse_softmax_cross_entropy(logits, label)
//   output(loss)
//   train(loss, optimizer=adamw(lr=1e-3, weight_decay=0.01))
//
// Statements:
//   NAME = input(shape=[..], dtype=float32)                          a user input
//   NAME = variable(shape=[..], dtype=.., init=INIT, frozen=false)   a variable
//       INIT: zeros | ones | constant(v) | uniform(low, high) | normal(std[, mean]) |
//             portable(std, stream) (torch_gpt.py's portable init, PORTABLE_UNIFORM);
//       each may add seed=N (0 = derived from the job seed; for portable: its generator
//       seed, used as given)
//   OUT[, OUT...] = OP(TENSOR, ..., attr=VALUE, ...)                  any registered op: positional
//       arguments are its input tensors, key=value its attrs (VALUE: 3, 0.5, true, "str",
//       [1,2], float32). The left side names every output (layer_norm has three).
//   output(TENSOR, ...)                  fetched every step
//   train(LOSS, optimizer=sgd(lr, momentum=, weight_decay=) | adam(lr, ...) | adamw(lr, ...))
//       adam/adamw take weight_decay, beta1, beta2, epsilon, bias_correction
//   config(name="job", micro_batches=N, gradient_accumulation_steps=N, zero_stage=N, seed=N,
//          stages=[cpu:[0,1], cpu:[2,3]])
//       stages: JobConfigProto.stage_placements, one placement per pipeline stage; the
//       compiler then assigns each op a stage by cost (compiler/pipeline/stage_balance_pass.h)
// Options after input/variable/op statements (space separated):
//   placement=cpu:[0,1] | cpu:[[0,1],[2,3]] | cpu:0-511
//   sbp=[S(0), B]          pins the defined tensor's layout (one SBP per mesh axis); with k
//                          outputs a list of k entries, `_` for free: sbp=[[S(0)], _, _]
//   in_sbp=[[S(1)], _]     op only: pins the layout each input is consumed in (`_` = free)
//   out_sbp=[[P]]          op only: pins the layout each output is produced in
//   stage=N  recompute=true  name=OPNAME (op only; default: the first output's name)
// Names are identifiers made of letters, digits, `_`, `.` and `/`, or "quoted strings".
// Tensors must be defined before use. A tensor or op without placement gets one from
// inference (infer_pass.h): an op takes its first input's, an input or variable its first
// consumer's.
//
// The format carries what the user writes: it does not print inferred descs or chosen SBPs.
// parse(print(g)) gives g back (same ToJobProto) for any graph built from text, and printing
// is a fixed point. Attributes equal to their defaults are not printed.
//
// Errors are InvalidArgument "line L:C: message (hint: ...)" followed by the line and a caret
// under the offending text: unknown ops and tensors (with suggestions), bad SBPs or
// placements, duplicate names, wrong numbers of inputs or outputs, bad attributes.
#ifndef ONEFLOW_LIKE_COMPILER_TEXT_FORMAT_H_
#define ONEFLOW_LIKE_COMPILER_TEXT_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/compiler/graph.h"

namespace oneflow_like {
namespace compiler {

// REQUIRES: `registry` outlives the returned graph.
absl::StatusOr<Graph> ParseGraph(absl::string_view text, const OpRegistry& registry);

// One statement per line, ending with a newline: config, inputs and variables in id order,
// ops in program order, output(...), train(...).
std::string PrintGraph(const Graph& graph);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_TEXT_FORMAT_H_
