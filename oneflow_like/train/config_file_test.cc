// Config files: the shipped configs parse to the intended options; every kind of mistake gives an
// error naming the file, line, section and field.
#include "oneflow_like/train/config_file.h"

#include "gtest/gtest.h"

namespace oneflow_like {
namespace train {
namespace {

std::string Error(const std::string& text) {
  absl::StatusOr<std::vector<std::string>> flags = ConfigToFlags(text, "x.cfg");
  EXPECT_FALSE(flags.ok()) << "accepted:\n" << text;
  return flags.ok() ? "" : std::string(flags.status().message());
}

TEST(ConfigFileTest, ShippedGpt4RankConfig) {
  absl::StatusOr<TrainerFlags> f = ParseTrainerConfig("configs/gpt_4rank.cfg", {});
  ASSERT_TRUE(f.ok()) << f.status();
  const TrainerOptions& o = f->options;
  EXPECT_EQ(o.model, Workload::kGpt);
  EXPECT_EQ(o.gpt.vocab, 256);
  EXPECT_EQ(o.layout.dp * o.layout.tp * o.layout.pp, 4);
  EXPECT_EQ(o.layout.dp, 2);
  EXPECT_EQ(o.layout.tp, 2);
  EXPECT_EQ(o.micro_batches, 2);
  EXPECT_EQ(o.text_path, "/usr/share/common-licenses/GPL-3");
  EXPECT_DOUBLE_EQ(o.learning_rate, 3e-3);
  EXPECT_EQ(f->steps, 300);
  EXPECT_EQ(f->checkpoint_every, 100);
  EXPECT_EQ(f->config_path, "configs/gpt_4rank.cfg");
}

TEST(ConfigFileTest, EveryShippedConfigParsesAndOverridesWin) {
  for (const char* path : {"configs/gpt_tiny.cfg", "configs/mlp.cfg", "configs/gpt_3d.cfg"}) {
    absl::StatusOr<TrainerFlags> f = ParseTrainerConfig(path, {"--steps=3", "--dp", "1"});
    ASSERT_TRUE(f.ok()) << path << ": " << f.status();
    EXPECT_EQ(f->steps, 3) << path;
    EXPECT_EQ(f->options.layout.dp, 1) << path;
  }
  absl::StatusOr<TrainerFlags> mlp = ParseTrainerConfig("configs/mlp.cfg", {});
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->options.model, Workload::kMlp);
  EXPECT_EQ(mlp->options.mlp.width, 256);
  EXPECT_TRUE(mlp->options.text_path.empty());
  absl::StatusOr<TrainerFlags> three_d = ParseTrainerConfig("configs/gpt_3d.cfg", {});
  ASSERT_TRUE(three_d.ok());
  EXPECT_TRUE(three_d->options.recompute);
  EXPECT_EQ(three_d->options.zero_stage, 1);
  EXPECT_EQ(three_d->options.boxing, compiler::BoxingStyle::kPointToPoint);
  absl::StatusOr<TrainerFlags> collective = ParseTrainerConfig("configs/mlp.cfg", {"--boxing=collective"});
  ASSERT_TRUE(collective.ok());
  EXPECT_EQ(collective->options.boxing, compiler::BoxingStyle::kCollective);
  EXPECT_EQ(three_d->options.layout.pp, 2);
  absl::StatusOr<TrainerFlags> gpu = ParseTrainerConfig("configs/gpt_gpu.cfg", {});  // planned with olplan
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(gpu->options.layout.device, DeviceType::kCuda);
  EXPECT_EQ(gpu->options.layout.world(), 8);
}

TEST(ConfigFileTest, ErrorsNameFileLineSectionAndField) {
  EXPECT_EQ(Error("[parallel]\n\ndp = two\n"), "x.cfg:3: [parallel] dp: expected an integer, got 'two'");
  const std::string unknown = Error("[parallel]\ndpp = 2\n");
  EXPECT_NE(unknown.find("x.cfg:2: [parallel] dpp: unknown field"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("dp, grad_accum"), std::string::npos) << unknown;  // lists the known fields
  EXPECT_NE(Error("[modle]\n").find("x.cfg:1: unknown section [modle]"), std::string::npos);
  EXPECT_NE(Error("[model]\nkind gpt\n").find("x.cfg:2: expected 'field = value'"), std::string::npos);
  EXPECT_NE(Error("dp = 2\n").find("before any [section]"), std::string::npos);
  EXPECT_NE(Error("[train]\nsteps = 3\nsteps = 4\n").find("x.cfg:3: [train] steps: given twice"), std::string::npos);
  EXPECT_NE(Error("[train]\nsteps =\n").find("[train] steps: missing value"), std::string::npos);
  EXPECT_NE(Error("[data]\nsource = text\n").find("needs [data] path"), std::string::npos);
  EXPECT_NE(Error("[data]\nsource = csv\n").find("[data] source: expected synthetic or text"), std::string::npos);
  EXPECT_NE(Error("[model]\nkind = gpt\n[optimizer]\nkind = sgd\n").find("x.cfg:4: [optimizer] kind"),
            std::string::npos);
  EXPECT_NE(Error("[parallel]\nzero_stage = 3\n").find("[parallel] zero_stage: expected an integer in [0, 2]"),
            std::string::npos);
  EXPECT_NE(Error("[parallel]\nboxing = nccl\n").find("[parallel] boxing: expected p2p, collective or auto"),
            std::string::npos);
  EXPECT_NE(Error("[parallel]\ncompute_streams = 3\n").find("[parallel] compute_streams: expected an integer in [1, 2]"),
            std::string::npos);
  EXPECT_NE(Error("[model]\nkind = rnn\n").find("[model] kind: expected mlp or gpt, got 'rnn'"), std::string::npos);
}

TEST(ConfigFileTest, CommentsAndBlankLinesAreIgnored) {
  absl::StatusOr<std::vector<std::string>> flags =
      ConfigToFlags("# header\n\n[train]   # trailing\n  steps = 7   # seven\n[parallel]\ntp=2\n", "c");
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(*flags, (std::vector<std::string>{"--steps=7", "--tp=2"}));
}

TEST(ConfigFileTest, OrderCollectivesIsAParallelField) {
  absl::StatusOr<std::vector<std::string>> flags =
      ConfigToFlags("[parallel]\nboxing = collective\norder_collectives = true\n", "c");
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(*flags, (std::vector<std::string>{"--boxing=collective", "--order_collectives=true"}));
  absl::StatusOr<TrainerFlags> parsed = ParseTrainerFlags(*flags);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->options.order_collectives);
  absl::StatusOr<TrainerFlags> bare = ParseTrainerFlags({"--order_collectives"});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->options.order_collectives);
  EXPECT_FALSE(ParseTrainerFlags({})->options.order_collectives);
}

TEST(ConfigFileTest, MissingFileIsNamed) {
  absl::StatusOr<TrainerFlags> f = ParseTrainerConfig("configs/nope.cfg", {});
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("configs/nope.cfg"), std::string::npos);
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
