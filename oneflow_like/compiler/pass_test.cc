#include "oneflow_like/compiler/pass.h"

#include "gtest/gtest.h"
#include "oneflow_like/compiler/infer_pass.h"
#include "oneflow_like/compiler/test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

using testing::ExpectError;

// Records its name in `log` and does `action` (nothing by default).
class ScriptedPass : public Pass {
 public:
  ScriptedPass(std::string name, std::vector<std::string>* log,
               std::function<absl::StatusOr<bool>(Graph*)> action = nullptr)
      : name_(std::move(name)), log_(log), action_(std::move(action)) {}
  std::string name() const override { return name_; }
  absl::StatusOr<bool> Run(Graph* graph) override {
    log_->push_back(name_);
    return action_ ? action_(graph) : false;
  }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  std::function<absl::StatusOr<bool>(Graph*)> action_;
};

class PassTest : public ::testing::Test {
 protected:
  std::unique_ptr<OpRegistry> registry_ = testing::BuiltinRegistry();
  Graph graph_ = testing::ParseOrDie(testing::kMlpText, *registry_);
  std::vector<std::string> log_;
};

TEST_F(PassTest, RunsPassesInOrderAndReportsChanges) {
  PassPipeline pipeline(PassPipelineOptions{true});
  InferPass* infer = pipeline.Add<InferPass>();
  pipeline.Add<ScriptedPass>("middle", &log_);
  pipeline.Add(std::make_unique<ScriptedPass>("last", &log_));
  EXPECT_EQ(infer->name(), "infer_shapes");
  ASSERT_EQ(pipeline.passes().size(), 3u);

  absl::StatusOr<bool> changed = pipeline.Run(&graph_);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);  // inference filled descs
  EXPECT_EQ(log_, (std::vector<std::string>{"middle", "last"}));
  EXPECT_EQ(graph_.tensor(graph_.FindTensor("logits")).desc->shape, Shape({64, 10}));
  // A second run finds nothing to do.
  changed = pipeline.Run(&graph_);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(*changed);
}

TEST_F(PassTest, VerifierNamesThePassThatBrokeAnInvariant) {
  auto breaker = [](Graph* g) -> absl::StatusOr<bool> {
    g->mutable_tensor(g->FindTensor("a"))->consumers.clear();
    return true;
  };
  PassPipeline checked(PassPipelineOptions{true});
  checked.Add<InferPass>();
  checked.Add<ScriptedPass>("breaker", &log_, breaker);
  checked.Add<ScriptedPass>("after", &log_);
  ExpectError(checked.Run(&graph_).status(), absl::StatusCode::kInternal,
              {"pass 'breaker' broke a graph invariant: graph verifier: asymmetric link: matmul 'logits' reads "
               "tensor 'a'"});
  EXPECT_EQ(log_, (std::vector<std::string>{"breaker"}));  // stopped there

  // Without verification the same pipeline runs to the end.
  Graph other = testing::ParseOrDie(testing::kMlpText, *registry_);
  PassPipeline unchecked;
  unchecked.Add<InferPass>();
  unchecked.Add<ScriptedPass>("breaker", &log_, breaker);
  unchecked.Add<ScriptedPass>("after", &log_);
  EXPECT_TRUE(unchecked.Run(&other).ok());
  EXPECT_EQ(log_.back(), "after");
}

TEST_F(PassTest, PassErrorsPassThroughAndStopThePipeline) {
  PassPipeline pipeline(PassPipelineOptions{true});
  pipeline.Add<ScriptedPass>("fails", &log_, [](Graph*) -> absl::StatusOr<bool> {
    return absl::InvalidArgumentError("relu 'a': something the user did");
  });
  pipeline.Add<ScriptedPass>("never", &log_);
  ExpectError(pipeline.Run(&graph_).status(), absl::StatusCode::kInvalidArgument, {"relu 'a': something the user did"});
  EXPECT_EQ(log_, (std::vector<std::string>{"fails"}));
}

TEST_F(PassTest, VerifierOptionsApplyAfterEachPass) {
  // Before inference the default verifier rejects the graph; a pipeline verifying only
  // structure accepts a pass that does nothing.
  PassPipeline strict(PassPipelineOptions{true});
  strict.Add<ScriptedPass>("noop", &log_);
  ExpectError(strict.Run(&graph_).status(), absl::StatusCode::kInternal,
              {"pass 'noop' broke a graph invariant", "has no placement (run the infer pass)"});
  PassPipelineOptions structural;
  structural.verify_after_each_pass = true;
  structural.verifier.require_inferred = false;
  PassPipeline lenient(structural);
  lenient.Add<ScriptedPass>("noop", &log_);
  EXPECT_TRUE(lenient.Run(&graph_).ok());
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
