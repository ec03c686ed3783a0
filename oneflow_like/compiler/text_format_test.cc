#include "oneflow_like/compiler/text_format.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/compiler/verifier.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;
using ::google::protobuf::util::MessageDifferencer;

// 17 significant digits always identify a double exactly.
std::string Repr17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

class TextFormatTest : public ::testing::Test {
 protected:
  // parse -> print -> parse gives the same JobProto, and printing is a fixed point.
  // Returns the printed text.
  std::string ExpectRoundTrip(const std::string& text) {
    Graph first = testing::ParseOrDie(text, *registry_);
    EXPECT_TRUE(VerifyGraph(first, VerifierOptions{false}).ok());
    const std::string printed = PrintGraph(first);
    absl::StatusOr<Graph> second = ParseGraph(printed, *registry_);
    EXPECT_TRUE(second.ok()) << second.status() << "\n" << printed;
    if (!second.ok()) return printed;
    std::string diff;
    MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&diff);
    EXPECT_TRUE(differencer.Compare(first.ToJobProto(), second->ToJobProto())) << diff << "\n" << printed;
    EXPECT_EQ(PrintGraph(*second), printed);
    return printed;
  }

  absl::Status ParseError(const std::string& text) { return ParseGraph(text, *registry_).status(); }

  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
};

TEST_F(TextFormatTest, MlpRoundTripsAndPrintsCanonically) {
  Graph g = testing::ParseOrDie(testing::kMlpText, *registry_);
  EXPECT_EQ(g.name(), "mlp");
  EXPECT_EQ(g.config().seed(), 1u);
  EXPECT_EQ(g.num_ops(), 5);
  EXPECT_EQ(g.num_tensors(), 10);
  const OpNode& fc2 = g.op(g.FindOp("logits"));
  EXPECT_EQ(fc2.type, "matmul");
  EXPECT_EQ(g.tensor(fc2.inputs[0]).name, "a");
  EXPECT_EQ(g.tensor(fc2.inputs[1]).name, "w2");
  EXPECT_EQ(g.tensor(g.FindTensor("label")).desc->dtype, DataType::kInt64);
  EXPECT_EQ(*g.tensor(g.FindTensor("x")).pinned_nd_sbp, NdSbp({Sbp::Split(0)}));
  EXPECT_FALSE(g.tensor(g.FindTensor("w1")).placement.has_value());  // inherited later by inference
  EXPECT_EQ(g.tensor(g.FindTensor("w2")).initializer.low(), -0.1);
  EXPECT_EQ(g.config().optimizer().kind(), OptimizerProto::ADAMW);
  EXPECT_EQ(g.config().loss(), "loss");

  const std::string printed = ExpectRoundTrip(testing::kMlpText);
  EXPECT_EQ(printed, R"(config(name="mlp", seed=1)
x = input(shape=[64,128]) placement=cpu:[0,1,2,3] sbp=[S(0)]
label = input(shape=[64], dtype=int64) placement=cpu:[0,1,2,3] sbp=[S(0)]
w1 = variable(shape=[128,256], init=normal(0.02))
b1 = variable(shape=[256], init=zeros)
w2 = variable(shape=[256,10], init=uniform(-0.1, 0.1))
h = matmul(x, w1)
hb = bias_add(h, b1)
a = relu(hb)
logits = matmul(a, w2)
loss = sparse_softmax_cross_entropy(logits, label)
output(logits, loss)
train(loss, optimizer=adamw(lr=0.001, weight_decay=0.01))
)");
}

TEST_F(TextFormatTest, GptBlockRoundTripsWithPinsStagesAndOptions) {
  Graph g = testing::ParseOrDie(testing::kGptBlockText, *registry_);
  const OpNode& ln1 = g.op(g.FindOp("h1"));
  ASSERT_EQ(ln1.outputs.size(), 3u);
  EXPECT_EQ(g.tensor(ln1.outputs[2]).name, "h1_inv_std");
  EXPECT_EQ(g.op(g.FindOp("q")).outputs.size(), 3u);  // variadic split
  EXPECT_EQ(g.op(g.FindOp("q")).attrs.Ints("sizes"), (std::vector<int64_t>{32, 32, 32}));
  EXPECT_DOUBLE_EQ(g.op(g.FindOp("scores")).attrs.Float("alpha"), 0.17677669529663687);
  EXPECT_TRUE(g.op(g.FindOp("probs")).recompute);
  EXPECT_TRUE(g.op(g.FindOp("probs")).attrs.Bool("causal"));
  EXPECT_EQ(g.op(g.FindOp("attn")).pinned_output_nd_sbp.at(0), NdSbp({Sbp::PartialSum(), Sbp::PartialSum()}));
  const OpNode& fc = g.op(g.FindOp("fc"));
  EXPECT_EQ(fc.stage, 1);
  EXPECT_EQ(fc.pinned_input_nd_sbp.at(1), NdSbp({Sbp::Broadcast(), Sbp::Split(1)}));
  EXPECT_TRUE(g.FindOp("mlp.proj").valid());
  EXPECT_FALSE(g.FindOp("proj").valid());
  EXPECT_EQ(g.tensor(g.FindTensor("x")).placement->hierarchy(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(g.tensor(g.FindTensor("w_head")).frozen);
  EXPECT_EQ(g.tensor(g.FindTensor("w_proj")).initializer.seed(), 11u);
  EXPECT_DOUBLE_EQ(g.op(g.FindOp("h2")).attrs.Float("epsilon"), 1e-6);
  EXPECT_EQ(g.config().micro_batches(), 2);
  EXPECT_DOUBLE_EQ(g.config().optimizer().beta2(), 0.95);
  EXPECT_FALSE(g.config().optimizer().has_beta1());

  const std::string printed = ExpectRoundTrip(testing::kGptBlockText);
  for (const char* line : {"x = input(shape=[8,16,32]) placement=cpu:[[0,1],[2,3]] sbp=[S(0), B]\n",
                           "h1, h1_mean, h1_inv_std = layer_norm(x, ln1_g, ln1_b)\n",
                           "scores = matmul(q, k, transpose_b=true, alpha=0.17677669529663687)\n",
                           "probs = softmax(scores, causal=true) recompute=true\n",
                           "attn = matmul(attn_ctx, w_o) out_sbp=[[P, P]]\n",
                           "fc = matmul(h2, w_fc) stage=1 in_sbp=[[S(0), B], [B, S(1)]]\n",
                           "proj = matmul(act, w_proj) name=mlp.proj stage=1\n",
                           "w_proj = variable(shape=[128,32], init=normal(0.02, seed=11)) sbp=[B, S(0)]\n",
                           "w_head = variable(shape=[32,50], init=uniform(-0.1, 0.1), frozen=true)\n",
                           "train(loss, optimizer=adamw(lr=0.0003, weight_decay=0.1, beta2=0.95))\n"}) {
    EXPECT_NE(printed.find(line), std::string::npos) << "missing: " << line << "in:\n" << printed;
  }
}

TEST_F(TextFormatTest, QuotedNamesVariadicOpsAndValuesRoundTrip) {
  const std::string text = R"(config(gradient_accumulation_steps=2, zero_stage=1)
"my x" = input(shape=[8,6]) placement=cpu:0-15
"true" = relu("my x")
c = cast("true", dtype=float64)
f = fill(shape=[2], value=0.1) placement=cpu:[0]
r = reshape("my x", shape=[-1,3])
p, q = split(r, axis=0, sizes=[6,10]) sbp=[_, [S(0)]]
cat = concat(p, q, p, axis=0)
s = scalar_mul(cat, value=1e-300) name="scale by tiny"
t = scalar_add(s, value=-inf)
u = variable(shape=[], dtype=float64, init=constant(-2.5))
)";
  Graph g = testing::ParseOrDie(text, *registry_);
  EXPECT_EQ(g.tensor(g.FindTensor("my x")).placement->num_devices(), 16);
  EXPECT_EQ(g.op(g.FindOp("c")).attrs.Dtype("dtype"), DataType::kFloat64);
  EXPECT_EQ(g.op(g.FindOp("r")).attrs.Ints("shape"), (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ(g.op(g.FindOp("cat")).inputs.size(), 3u);
  EXPECT_FALSE(g.tensor(g.FindTensor("p")).pinned_nd_sbp.has_value());
  EXPECT_EQ(*g.tensor(g.FindTensor("q")).pinned_nd_sbp, NdSbp({Sbp::Split(0)}));
  EXPECT_EQ(g.op(g.FindOp("scale by tiny")).attrs.Float("value"), 1e-300);
  EXPECT_EQ(g.op(g.FindOp("t")).attrs.Float("value"), -HUGE_VAL);
  EXPECT_EQ(g.tensor(g.FindTensor("u")).initializer.value(), -2.5);
  const std::string printed = ExpectRoundTrip(text);
  EXPECT_NE(printed.find("\"true\" = relu(\"my x\")\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("placement=cpu:0-15"), std::string::npos) << printed;
  EXPECT_NE(printed.find("s = scalar_mul(cat, value=1e-300) name=\"scale by tiny\"\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("value=-inf"), std::string::npos) << printed;
}

TEST_F(TextFormatTest, FloatAttributesRoundTripExactly) {
  for (double v : {0.1, 1.0 / 3.0, 1e-8, 123456789.125, 5e-324, 1.7976931348623157e308}) {
    const std::string text =
        absl::StrCat("x = input(shape=[2])\ny = scalar_mul(x, value=", Repr17(v), ")\n");
    Graph g = testing::ParseOrDie(text, *registry_);
    EXPECT_EQ(g.op(g.FindOp("y")).attrs.Float("value"), v);
    Graph again = testing::ParseOrDie(PrintGraph(g), *registry_);
    EXPECT_EQ(again.op(again.FindOp("y")).attrs.Float("value"), v) << PrintGraph(g);
  }
}

TEST_F(TextFormatTest, ErrorsPointAtTheOffendingText) {
  const std::string head = "x = input(shape=[4,8]) placement=cpu:[0,1]\nw = variable(shape=[8,2])\n";
  // Unknown op, with suggestions, line:column and a caret under the op name.
  ExpectError(ParseError(head + "y = matmull(x, w)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:5: unknown op 'matmull' (hint: did you mean matmul?)", "\n  y = matmull(x, w)\n      ^"});
  ExpectError(ParseError(head + "y = frobnicate(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:5: unknown op 'frobnicate'", "docs/ops_contract.md"});
  // Unknown tensors.
  ExpectError(ParseError(head + "y = matmul(x, ww)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:15: unknown tensor 'ww' (hint: did you mean w?)"});
  ExpectError(ParseError(head + "y = relu(later)\nlater = relu(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:10: unknown tensor 'later'", "defined on an earlier line"});
  // Bad SBPs and placements.
  ExpectError(ParseError("x = input(shape=[4]) sbp=[S(x)]\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:26: bad SBP '[S(x)]'", "split axis 'x' is not an integer", "S(axis), B or P"});
  ExpectError(ParseError("x = input(shape=[4]) sbp=[Q]\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:26: bad SBP '[Q]'", "unknown SBP 'Q'"});
  ExpectError(ParseError(head + "y = matmul(x, w) in_sbp=[[S(0)]]\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:25: in_sbp= has 1 entries but the op has 2 input(s)", "`_` for free"});
  ExpectError(ParseError(head + "y = matmul(x, w) out_sbp=[[S(0), Z]]\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:26: bad SBP '[S(0), Z]' in out_sbp="});
  ExpectError(ParseError("x = input(shape=[4]) placement=cpu:[0,0]\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:32: bad placement 'cpu:[0,0]'", "duplicate rank 0", "hint: e.g. placement="});
  // Duplicate names.
  ExpectError(ParseError(head + "x = relu(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:1: duplicate tensor name 'x' (already defined on line 1)"});
  ExpectError(ParseError(head + "a = relu(x) name=r\nb = relu(x) name=r\n"), absl::StatusCode::kInvalidArgument,
              {"line 4:18: duplicate op name 'r' (already used on line 3)"});
  ExpectError(ParseError(head + "q, q = split(x, axis=0, sizes=[2,2])\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:4: output name 'q' appears twice"});
  // Arity.
  ExpectError(ParseError(head + "y = matmul(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:5: matmul takes 2 input(s) (a, b), got 1"});
  ExpectError(ParseError(head + "g = variable(shape=[8])\nh = layer_norm(x, g, g)\n"),
              absl::StatusCode::kInvalidArgument,
              {"line 4:1: layer_norm has 3 output(s) (y, mean, inv_std) but 1 name(s) are given",
               "write `h, h_mean, h_inv_std = layer_norm(...)`"});
  // Attributes.
  ExpectError(ParseError(head + "y = matmul(x, w, transpose=true)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:18: matmul has no attribute 'transpose'", "did you mean transpose_a, transpose_b?"});
  ExpectError(ParseError(head + "y = matmul(x, w, transpose_b=1)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:18: matmul 'y': attribute 'transpose_b' must be bool, got int 1"});
  ExpectError(ParseError(head + "y = reshape(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:5: reshape 'y': missing required attribute 'shape'"});
  ExpectError(ParseError(head + "y = cast(x, dtype=float128)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:19: 'float128' is not a value for attribute 'dtype'"});
  ExpectError(ParseError(head + "y = relu(3)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:10: argument 3 of relu is not a tensor name"});
  ExpectError(ParseError(head + "y = matmul(x, transpose_b=true, w)\n"), absl::StatusCode::kInvalidArgument,
              {"line 3:33: positional argument after key=value arguments"});
}

TEST_F(TextFormatTest, StatementErrors) {
  ExpectError(ParseError("x = input(dtype=float32)\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:5: input 'x' needs a shape"});
  ExpectError(ParseError("x = input(shape=[4], dtype=f32)\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:28: unknown dtype f32", "float32"});
  ExpectError(ParseError("w = variable(shape=[4], init=normall(0.1))\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:30: unknown initializer normall(...)", "did you mean normal?"});
  ExpectError(ParseError("w = variable(shape=[4], init=uniform(0.1))\n"), absl::StatusCode::kInvalidArgument,
              {"uniform(...) needs high (low, high)"});
  ExpectError(ParseError("x = input(shape=[4]) stag=1\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:22: unknown option 'stag'"});
  ExpectError(ParseError("x = input(shape=[4])\ny = relu(x) stag=1\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:13: unknown option 'stag' (hint: did you mean stage?)"});
  ExpectError(ParseError("x = input(shape=[4])\ny = relu(x) stage=-1\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:19: stage must be >= 0, got -1"});
  ExpectError(ParseError("x = input(shape=[4])\nrelu(x)\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:1: 'relu' needs names for its outputs", "write `y = relu(...)`"});
  ExpectError(ParseError("frob(x)\n"), absl::StatusCode::kInvalidArgument, {"line 1:1: unknown statement 'frob'"});
  ExpectError(ParseError("x = input(shape=[4])\noutput(x) y\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:11: unexpected text after output(...)"});
  ExpectError(ParseError("x = input(shape=[4])\ntrain(x, optimizer=adamm(lr=1))\n"),
              absl::StatusCode::kInvalidArgument, {"line 2:20: unknown optimizer adamm(...)"});
  ExpectError(ParseError("x = input(shape=[4])\ntrain(x, optimizer=sgd(momentum=0.9))\n"),
              absl::StatusCode::kInvalidArgument, {"line 2:20: sgd(...) needs lr="});
  ExpectError(ParseError("x = input(shape=[4])\ntrain(x, optimizer=sgd(lr=0.1, beta1=0.9))\n"),
              absl::StatusCode::kInvalidArgument, {"line 2:32: sgd(...) has no argument 'beta1'"});
  ExpectError(ParseError("config(seed=1)\nconfig(seed=2)\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:1: config(...) is already given on line 1"});
  ExpectError(ParseError("x = input(shape=[4]) name=\"x\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:22: unknown option 'name'"});
  ExpectError(ParseError("x = relu(\"x\n"), absl::StatusCode::kInvalidArgument, {"line 1:10: unterminated string"});
  ExpectError(ParseError("x = input(shape=[4]) # fine\ny = 3\n"), absl::StatusCode::kInvalidArgument,
              {"line 2:5: expected an op call after '=', found 3"});
  ExpectError(ParseError("x = input(shape=[4], shape=[5])\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:22: argument 'shape' of input(...) is given twice"});
  ExpectError(ParseError("x = input(shape=[4, 1x])\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:21: bad number '1x'"});
}

TEST_F(TextFormatTest, CommentsBlankLinesAndCrlfAreIgnored) {
  Graph g = testing::ParseOrDie("# header\r\n\r\n  x = input(shape=[2])   # trailing\r\n\t\ny = relu(x)#c\n", *registry_);
  EXPECT_EQ(g.num_tensors(), 2);
  EXPECT_EQ(g.num_ops(), 1);
}

TEST_F(TextFormatTest, LargePlacementsParseQuickly) {
  std::vector<std::string> ranks;
  for (int r = 0; r < 512; ++r) ranks.push_back(absl::StrCat(r));
  std::vector<std::string> rows;
  for (int row = 0; row < 8; ++row) {
    rows.push_back(absl::StrCat("[", absl::StrJoin(ranks.begin() + 64 * row, ranks.begin() + 64 * (row + 1), ","), "]"));
  }
  const std::string flat = absl::StrCat("cpu:[", absl::StrJoin(ranks, ","), "]");
  const std::string mesh = absl::StrCat("cpu:[", absl::StrJoin(rows, ","), "]");
  std::string text = absl::StrCat("x = input(shape=[4096,1024]) placement=", mesh, " sbp=[S(0), B]\n");
  for (int i = 0; i < 100; ++i) {
    absl::StrAppend(&text, "h", i, " = relu(", i == 0 ? "x" : absl::StrCat("h", i - 1), ") placement=",
                    i % 2 ? flat : mesh, "\n");
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Graph> g = ParseGraph(text, *registry_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_LT(seconds, 2.0);  // ~50k ranks in total; milliseconds in practice
  const Placement& p = *g->tensor(g->FindTensor("x")).placement;
  EXPECT_EQ(p.hierarchy(), (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(p.ranks()[511], Rank(511));
  EXPECT_EQ(g->op(g->FindOp("h1")).placement->num_devices(), 512);
  const std::string printed = ExpectRoundTrip(text);
  EXPECT_NE(printed.find("h1 = relu(h0) placement=cpu:0-511\n"), std::string::npos);
}

TEST_F(TextFormatTest, StagePlacementsRoundTripAndValidate) {
  const std::string text =
      "config(micro_batches=4, stages=[cpu:[0, 1], cpu:[[2,3],[4,5]], cpu:6-15])\n"
      "x = input(shape=[8,4])\n"
      "y = relu(x)\n";
  absl::StatusOr<Graph> mixed = ParseGraph(text, *registry_);
  ExpectError(mixed.status(), absl::StatusCode::kInvalidArgument,
              {"stage_placements[1]", "cpu:[[2,3],[4,5]]", "2 hierarchy axes", "stage_placements[0]", "hint"});

  const std::string same_rank = "config(micro_batches=4, stages=[cpu:[0, 1], cpu:[2,3], cpu:6-15])\nx = input(shape=[8,4])\n";
  Graph g = testing::ParseOrDie(same_rank, *registry_);
  ASSERT_EQ(g.config().stage_placements_size(), 3);
  EXPECT_EQ(Placement::FromProto(g.config().stage_placements(0))->ToString(), "cpu:[0,1]");
  EXPECT_EQ(Placement::FromProto(g.config().stage_placements(2))->num_devices(), 10);
  const std::string printed = ExpectRoundTrip(same_rank);
  EXPECT_NE(printed.find("config(micro_batches=4, stages=[cpu:[0,1], cpu:[2,3], cpu:6-15])\n"), std::string::npos)
      << printed;

  ExpectError(ParseError("config(stages=[relu])\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:16", "stages: relu is not a placement", "hint"});
  ExpectError(ParseError("config(stages=[cpu:[0,0]])\n"), absl::StatusCode::kInvalidArgument,
              {"line 1:16", "bad placement 'cpu:[0,0]'", "duplicate rank"});
  ExpectError(ParseError("config(stages=[])\n"), absl::StatusCode::kInvalidArgument, {"non-empty list"});
  ExpectError(ParseError("x = input(shape=[2,2])\ny = matmul(x, x, transpose_a=cpu:[0])\n"),
              absl::StatusCode::kInvalidArgument, {"line 2", "attribute 'transpose_a' cannot be a placement (cpu:[0])"});
}

TEST_F(TextFormatTest, PortableInitializerRoundTrips) {
  const std::string text =
      "a = variable(shape=[4,8], init=portable(0.02, 3))\n"
      "b = variable(shape=[8], init=portable(0.5, 17, seed=7))\n";
  Graph g = testing::ParseOrDie(text, *registry_);
  const InitializerProto& a = g.tensor(g.FindTensor("a")).initializer;
  EXPECT_EQ(a.kind(), InitializerProto::PORTABLE_UNIFORM);
  EXPECT_EQ(a.stddev(), 0.02);
  EXPECT_EQ(a.stream(), 3u);
  EXPECT_EQ(a.portable_seed(), 0u);
  const InitializerProto& b = g.tensor(g.FindTensor("b")).initializer;
  EXPECT_EQ(b.stream(), 17u);
  EXPECT_EQ(b.portable_seed(), 7u);
  EXPECT_EQ(b.seed(), 0u) << "seed= of portable(...) is its generator seed, not the Philox key";
  const std::string printed = ExpectRoundTrip(text);
  EXPECT_NE(printed.find("init=portable(0.02, 3))"), std::string::npos) << printed;
  EXPECT_NE(printed.find("init=portable(0.5, 17, seed=7))"), std::string::npos) << printed;
  ExpectError(ParseError("w = variable(shape=[4], init=portable(0.1))\n"), absl::StatusCode::kInvalidArgument,
              {"portable(...) needs stream (std, stream)"});
  ExpectError(ParseError("w = variable(shape=[4], init=portable(0.1, -1))\n"), absl::StatusCode::kInvalidArgument,
              {"stream"});
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
