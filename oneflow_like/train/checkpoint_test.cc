// Sharded checkpoints end to end on a tiny GPT (AdamW, so the optimizer state includes the
// moments and the step counter): save under dp2 x tp2 (4 ranks), load under the same layout
// and under others (dp2, one rank, tp2, pp2, ZeRO-1), resume = uninterrupted, and bad input.
// The reference for every load is the saving session's own assembled variables
// (Session::ReadVariable), compared byte for byte.
#include "oneflow_like/train/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "oneflow_like/compiler/driver/compile.h"
#include "oneflow_like/compiler/test_util.h"
#include "oneflow_like/core/proto/checkpoint.pb.h"
#include "oneflow_like/models/gpt.h"
#include "oneflow_like/models/synthetic_data.h"
#include "oneflow_like/train/checkpoint_format.h"

namespace oneflow_like {
namespace train {
namespace {

namespace fs = std::filesystem;
using Variables = std::map<std::string, Tensor>;

const models::GptConfig kTiny{.vocab = 64, .seq_len = 16, .n_layer = 2, .n_embd = 32, .n_head = 2, .batch = 4};

struct Layout {
  models::ParallelLayout parallel;
  int32_t zero_stage = 0;
};

class CheckpointTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = compiler::testing::BuiltinRegistry().release();
    plans_ = new std::map<std::string, PlanProto>();
    root_ = new std::string(::testing::TempDir() + "/checkpoint_test");
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    // The shared checkpoint: steps 0 and 1 under dp2 x tp2, saved as step_00000001 (the last
    // step run, as the trainer numbers checkpoints; training resumes at step + 1).
    std::unique_ptr<actor::Session> session = NewSession({{.dp = 2, .tp = 2}}, kTiny);
    ASSERT_NE(session, nullptr);
    RunSteps(session.get(), 0, 2);
    saved_ = new Variables(ReadAll(*session));
    ASSERT_TRUE(SaveSession(*session, Meta(1), Saved()).ok());
  }
  static void TearDownTestSuite() {
    delete saved_;
    delete root_;
    delete registry_;
    delete plans_;
  }

  static CheckpointMeta Meta(int64_t step) {
    return CheckpointMeta{step, (step + 1) * kTiny.batch, "dp2 tp2 pp1", 77};
  }
  static std::string Saved() { return CheckpointDirName(*root_, 1); }

  // Plans are compiled once per (layout, config) and cached for the whole suite.
  static std::unique_ptr<actor::Session> NewSession(const Layout& layout, const models::GptConfig& config) {
    const std::string key = absl::StrCat(layout.parallel.dp, "/", layout.parallel.tp, "/", layout.parallel.pp, "/",
                                         layout.zero_stage, "/", config.n_layer, "/", config.n_embd);
    auto cached = plans_->find(key);
    if (cached == plans_->end()) {
      models::TrainOptions train;
      train.zero_stage = layout.zero_stage;
      absl::StatusOr<compiler::Graph> graph = models::BuildGptJob(*registry_, config, layout.parallel, train);
      EXPECT_TRUE(graph.ok()) << graph.status();
      if (!graph.ok()) return nullptr;
      absl::StatusOr<PlanProto> plan = compiler::Compile(*std::move(graph));
      EXPECT_TRUE(plan.ok()) << plan.status();
      if (!plan.ok()) return nullptr;
      cached = plans_->emplace(key, *std::move(plan)).first;
    }
    absl::StatusOr<std::unique_ptr<actor::Session>> session = actor::Session::Create(cached->second, registry_);
    EXPECT_TRUE(session.ok()) << session.status();
    return session.ok() ? *std::move(session) : nullptr;
  }

  // Steps [first, first + count) with the step's synthetic data (a function of the step only).
  static std::vector<double> RunSteps(actor::Session* session, int64_t first, int64_t count) {
    std::vector<double> losses;
    for (int64_t step = first; step < first + count; ++step) {
      models::TokenBatch batch = models::SyntheticBatch(step, kTiny.batch, kTiny);
      EXPECT_TRUE(session->Feed("idx", batch.inputs).ok());
      EXPECT_TRUE(session->Feed("targets", batch.targets).ok());
      absl::Status status = session->RunStep();
      EXPECT_TRUE(status.ok()) << status;
      absl::StatusOr<Tensor> loss = session->Fetch("loss");
      EXPECT_TRUE(loss.ok()) << loss.status();
      if (!status.ok() || !loss.ok()) return losses;
      losses.push_back(loss->GetAsDouble(0));
    }
    return losses;
  }

  static Variables ReadAll(const actor::Session& session) {
    std::set<std::string> names;
    for (int rank = 0; rank < session.world_size(); ++rank) {
      if (session.runtime(rank) == nullptr) continue;
      for (const std::string& name : session.runtime(rank)->VariableNames()) names.insert(name);
    }
    Variables variables;
    for (const std::string& name : names) {
      absl::StatusOr<Tensor> value = session.ReadVariable(name);
      EXPECT_TRUE(value.ok()) << value.status();
      if (value.ok()) variables[name] = *value;
    }
    return variables;
  }

  // Same names, dtypes, shapes and bytes; except that Adam step counters "optimizer/step_<k>"
  // (one per parameter placement: pp2 has two) must equal the expected "optimizer/step".
  static void ExpectBitIdentical(const Variables& expected, const Variables& actual, const std::string& where) {
    for (const auto& [name, value] : expected) EXPECT_EQ(actual.count(name), 1u) << where << ": missing " << name;
    for (const auto& [name, value] : actual) {
      const bool extra_counter = name.rfind("optimizer/step_", 0) == 0 && expected.count(name) == 0;
      auto found = expected.find(extra_counter ? "optimizer/step" : name);
      ASSERT_NE(found, expected.end()) << where << ": unexpected " << name;
      ASSERT_EQ(found->second.desc(), value.desc()) << where << ": " << name;
      EXPECT_EQ(std::memcmp(found->second.raw_data(), value.raw_data(), value.byte_size()), 0)
          << where << ": variable " << name << " differs";
    }
  }

  static std::string CopyOfSaved(const std::string& name) {
    const std::string copy = *root_ + "/" + name;
    fs::remove_all(copy);
    fs::copy(Saved(), copy, fs::copy_options::recursive);
    return copy;
  }

  static std::unique_ptr<actor::Session> FreshDp2Tp2() { return NewSession({{.dp = 2, .tp = 2}}, kTiny); }

  static OpRegistry* registry_;
  static std::string* root_;
  static Variables* saved_;
  static std::map<std::string, PlanProto>* plans_;
};

OpRegistry* CheckpointTest::registry_ = nullptr;
std::string* CheckpointTest::root_ = nullptr;
Variables* CheckpointTest::saved_ = nullptr;
std::map<std::string, PlanProto>* CheckpointTest::plans_ = nullptr;

void ExpectError(const absl::Status& status, std::initializer_list<std::string> parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos) << "'" << part << "' not in: " << status;
  }
}

TEST_F(CheckpointTest, TheCheckpointHoldsParametersAndAdamState) {
  ASSERT_FALSE(saved_->empty());
  bool moment = false, counter = false;
  for (const auto& [name, value] : *saved_) {
    moment = moment || name == "wte/adam_m";
    counter = counter || (name == "optimizer/step" && value.dtype() == DataType::kInt64 && value.GetAsDouble(0) == 2);
  }
  EXPECT_TRUE(moment) << "no optimizer state for wte";
  EXPECT_TRUE(counter) << "no step counter variable";
  EXPECT_TRUE(fs::exists(Saved() + "/COMPLETE"));
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(fs::exists(Saved() + "/rank_" + std::to_string(rank) + "/shards.bin"));
  }
}

TEST_F(CheckpointTest, RoundTripUnderTheSameLayoutIsBitIdentical) {
  std::unique_ptr<actor::Session> session = FreshDp2Tp2();
  ASSERT_NE(session, nullptr);
  const Variables before = ReadAll(*session);
  int differing = 0;  // the trained values differ from a fresh initialization
  for (const auto& [name, value] : before) {
    differing += std::memcmp(value.raw_data(), saved_->at(name).raw_data(), value.byte_size()) != 0;
  }
  EXPECT_GT(differing, 0);
  absl::StatusOr<CheckpointMeta> meta = LoadSession(session.get(), Saved());
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->step, 1);
  EXPECT_EQ(meta->data_position, 2 * kTiny.batch);
  EXPECT_EQ(meta->layout, "dp2 tp2 pp1");
  EXPECT_EQ(meta->plan_hash, 77u);
  ExpectBitIdentical(*saved_, ReadAll(*session), "dp2 x tp2");
}

TEST_F(CheckpointTest, ReshardingToOtherLayoutsIsBitIdentical) {
  const std::vector<std::pair<std::string, Layout>> layouts = {
      {"dp2", {{.dp = 2}}},
      {"one rank", {{}}},
      {"tp2", {{.tp = 2}}},
      {"pp2", {{.pp = 2}}},
      {"dp2 zero1", {{.dp = 2}, 1}},
      {"dp2 zero2", {{.dp = 2}, 2}},  // the parameters themselves sharded
  };
  int64_t logical_bytes = 0;
  for (const auto& [name, value] : *saved_) logical_bytes += value.byte_size();
  for (const auto& [label, layout] : layouts) {
    std::unique_ptr<actor::Session> session = NewSession(layout, kTiny);
    ASSERT_NE(session, nullptr) << label;
    CheckpointLoadStats stats;
    absl::StatusOr<CheckpointMeta> meta = LoadSession(session.get(), Saved(), &stats);
    ASSERT_TRUE(meta.ok()) << label << ": " << meta.status();
    ExpectBitIdentical(*saved_, ReadAll(*session), label);
    if (label == "pp2") {
      // And back: pp2's two step counters ("optimizer/step", "optimizer/step_1") -> one rank.
      const std::string dir = *root_ + "/from_pp2";
      fs::remove_all(dir);
      ASSERT_TRUE(SaveSession(*session, *meta, dir).ok());
      std::unique_ptr<actor::Session> one = NewSession({{}}, kTiny);
      ASSERT_NE(one, nullptr);
      ASSERT_TRUE(LoadSession(one.get(), dir).ok());
      ExpectBitIdentical(*saved_, ReadAll(*one), "pp2 -> one rank");
    }
    if (label == "one rank") {
      // One copy of every broadcast box is read, and nothing else (1 MiB chunks = whole shards).
      EXPECT_EQ(stats.bytes_read, logical_bytes);
      EXPECT_EQ(stats.bytes_needed, logical_bytes);
    }
  }
}

TEST_F(CheckpointTest, PartialLoadsReadOnlyTheChunksTheyNeed) {
  // Saved by one rank in 64-byte checksum chunks; each tp2 rank reads about half of it.
  std::unique_ptr<actor::Session> one = NewSession({{}}, kTiny);
  ASSERT_NE(one, nullptr);
  RunSteps(one.get(), 0, 1);
  const Variables trained = ReadAll(*one);
  const std::string dir = *root_ + "/one_rank_small_chunks";
  fs::remove_all(dir);
  ASSERT_TRUE(SaveSession(*one, Meta(1), dir, CheckpointSaveOptions{.chunk_bytes = 64}).ok());
  const int64_t file_bytes = static_cast<int64_t>(fs::file_size(dir + "/rank_0/shards.bin"));
  std::unique_ptr<actor::Session> tp2 = NewSession({{.tp = 2}}, kTiny);
  ASSERT_NE(tp2, nullptr);
  for (int rank = 0; rank < 2; ++rank) {
    CheckpointLoadStats stats;
    ASSERT_TRUE(LoadRankShards(tp2->runtime(rank), dir, &stats).ok());
    EXPECT_LT(stats.bytes_read, file_bytes) << "rank " << rank;
    EXPECT_GE(stats.bytes_read, stats.bytes_needed) << "rank " << rank;
  }
  ExpectBitIdentical(trained, ReadAll(*tp2), "tp2 from one rank");
}

TEST_F(CheckpointTest, ResumeEqualsUninterruptedTraining) {
  constexpr int kSteps = 4, kFirst = 2;
  std::unique_ptr<actor::Session> straight = FreshDp2Tp2();
  ASSERT_NE(straight, nullptr);
  const std::vector<double> all = RunSteps(straight.get(), 0, kSteps);
  ASSERT_EQ(all.size(), static_cast<size_t>(kSteps));
  // The shared checkpoint is exactly the first kFirst steps of this run.
  std::unique_ptr<actor::Session> resumed = FreshDp2Tp2();
  ASSERT_NE(resumed, nullptr);
  absl::StatusOr<CheckpointMeta> meta = LoadSession(resumed.get(), Saved());
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_EQ(meta->step + 1, kFirst);
  const std::vector<double> rest = RunSteps(resumed.get(), meta->step + 1, kSteps - kFirst);
  ASSERT_EQ(rest.size(), static_cast<size_t>(kSteps - kFirst));
  for (int i = 0; i < kSteps - kFirst; ++i) EXPECT_EQ(rest[i], all[kFirst + i]) << "step " << kFirst + i;
  ExpectBitIdentical(ReadAll(*straight), ReadAll(*resumed), "resumed dp2 x tp2");

  // Under another layout the run continues too: same losses up to float rounding.
  std::unique_ptr<actor::Session> one = NewSession({{}}, kTiny);
  ASSERT_NE(one, nullptr);
  ASSERT_TRUE(LoadSession(one.get(), Saved()).ok());
  const std::vector<double> rest_one = RunSteps(one.get(), kFirst, kSteps - kFirst);
  ASSERT_EQ(rest_one.size(), static_cast<size_t>(kSteps - kFirst));
  for (int i = 0; i < kSteps - kFirst; ++i) EXPECT_NEAR(rest_one[i], all[kFirst + i], 1e-5) << "step " << kFirst + i;
}

// ZeRO-2 stores the parameters as dp shards; a checkpoint saved there resumes under one rank,
// and one saved by one rank resumes under ZeRO-2, both continuing the uninterrupted ZeRO-2 run.
TEST_F(CheckpointTest, ZeroTwoCheckpointsResumeUnderOtherLayouts) {
  constexpr int kSteps = 4, kFirst = 2;
  const Layout zero2{{.dp = 2}, 2};
  std::unique_ptr<actor::Session> straight = NewSession(zero2, kTiny);
  ASSERT_NE(straight, nullptr);
  const std::vector<double> all = RunSteps(straight.get(), 0, kSteps);
  ASSERT_EQ(all.size(), static_cast<size_t>(kSteps));
  struct Leg {
    std::string name;
    Layout saver, loader;
  };
  for (const Leg& leg : {Leg{"zero2 dp2 -> one rank", zero2, Layout{}}, Leg{"one rank -> zero2 dp2", Layout{}, zero2}}) {
    SCOPED_TRACE(leg.name);
    std::unique_ptr<actor::Session> saver = NewSession(leg.saver, kTiny);
    ASSERT_NE(saver, nullptr);
    ASSERT_EQ(RunSteps(saver.get(), 0, kFirst).size(), static_cast<size_t>(kFirst));
    const std::string dir = *root_ + "/zero2_" + std::to_string(leg.saver.zero_stage);
    fs::remove_all(dir);
    ASSERT_TRUE(SaveSession(*saver, Meta(kFirst - 1), dir).ok());
    std::unique_ptr<actor::Session> loader = NewSession(leg.loader, kTiny);
    ASSERT_NE(loader, nullptr);
    ASSERT_TRUE(LoadSession(loader.get(), dir).ok());
    ExpectBitIdentical(ReadAll(*saver), ReadAll(*loader), leg.name);
    const std::vector<double> rest = RunSteps(loader.get(), kFirst, kSteps - kFirst);
    ASSERT_EQ(rest.size(), static_cast<size_t>(kSteps - kFirst));
    for (int i = 0; i < kSteps - kFirst; ++i) EXPECT_NEAR(rest[i], all[kFirst + i], 1e-5) << "step " << kFirst + i;
  }
}

TEST_F(CheckpointTest, AnInterruptedSaveIsRejectedAndSkipped) {
  std::unique_ptr<actor::Session> session = FreshDp2Tp2();
  ASSERT_NE(session, nullptr);
  const std::string crashed = CheckpointDirName(*root_, 3);
  fs::remove_all(crashed);
  // Ranks 0 and 1 saved, then the job died: no rank 2, 3 and no COMPLETE.
  for (int rank = 0; rank < 2; ++rank) ASSERT_TRUE(SaveRankShards(*session->runtime(rank), Meta(3), 4, crashed).ok());
  ExpectError(LoadSession(session.get(), crashed).status(), {"incomplete checkpoint", crashed, "interrupted"});
  ExpectError(MarkCheckpointComplete(crashed, 4), {"missing file", crashed + "/rank_2/meta.pb"});
  absl::StatusOr<std::string> latest = LatestCheckpoint(*root_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, Saved());
  EXPECT_EQ(LatestCheckpoint(*root_ + "/nothing_here").status().code(), absl::StatusCode::kNotFound);
  // Saving into a complete checkpoint would mix two saves: refused.
  EXPECT_EQ(SaveRankShards(*session->runtime(0), Meta(1), 4, Saved()).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(CheckpointTest, CorruptedTruncatedAndGarbageFilesAreNamed) {
  std::unique_ptr<actor::Session> session = FreshDp2Tp2();
  ASSERT_NE(session, nullptr);
  // One flipped byte inside rank 1's shard of its first variable.
  const std::string corrupted = CopyOfSaved("corrupted");
  absl::StatusOr<std::string> meta_bytes = ReadWholeFile(corrupted + "/rank_1/meta.pb");
  ASSERT_TRUE(meta_bytes.ok());
  CheckpointRankProto rank_meta;
  ASSERT_TRUE(rank_meta.ParseFromString(*meta_bytes));
  const CheckpointVariableProto& victim = rank_meta.variables(0);
  {
    std::fstream file(corrupted + "/rank_1/shards.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(victim.byte_offset() + victim.byte_length() / 2);
    const char byte = static_cast<char>(file.get() ^ 0x10);
    file.seekp(victim.byte_offset() + victim.byte_length() / 2);
    file.put(byte);
  }
  ExpectError(LoadSession(session.get(), corrupted).status(),
              {"checksum mismatch", "rank_1/shards.bin", "'" + victim.name() + "'", "rank 1"});

  const std::string truncated = CopyOfSaved("truncated");
  fs::resize_file(truncated + "/rank_2/shards.bin", fs::file_size(truncated + "/rank_2/shards.bin") - 3);
  ExpectError(LoadSession(session.get(), truncated).status(), {"truncated file", "rank_2/shards.bin"});

  const std::string garbage = CopyOfSaved("garbage");
  ASSERT_TRUE(WriteFileAtomically(garbage + "/rank_0/meta.pb", "\xff\xfe not a protobuf \x01\x02").ok());
  ExpectError(LoadSession(session.get(), garbage).status(), {"corrupted file", "rank_0/meta.pb"});
  fs::remove(garbage + "/COMPLETE");  // before COMPLETE, the parse itself must fail
  ExpectError(MarkCheckpointComplete(garbage, 4), {"corrupted file", "rank_0/meta.pb"});

  const std::string garbage_marker = CopyOfSaved("garbage_marker");
  ASSERT_TRUE(WriteFileAtomically(garbage_marker + "/COMPLETE", "junk").ok());
  ExpectError(LoadSession(session.get(), garbage_marker).status(), {"corrupted file", "COMPLETE"});

  const std::string missing = CopyOfSaved("missing_shards");
  fs::remove(missing + "/rank_3/shards.bin");
  ExpectError(LoadSession(session.get(), missing).status(), {"missing file", "rank_3/shards.bin"});
}

TEST_F(CheckpointTest, ACheckpointOfAnotherModelNamesTheVariable) {
  models::GptConfig wider = kTiny;
  wider.n_embd = 48;  // every weight changes shape
  std::unique_ptr<actor::Session> session = NewSession({{.dp = 2}}, wider);
  ASSERT_NE(session, nullptr);
  ExpectError(LoadSession(session.get(), Saved()).status(), {"logical shape or dtype mismatch", "variable '"});

  models::GptConfig deeper = kTiny;
  deeper.n_layer = 3;  // h2.* does not exist in the checkpoint
  session = NewSession({{}}, deeper);
  ASSERT_NE(session, nullptr);
  ExpectError(LoadSession(session.get(), Saved()).status(), {"variable 'h2.", "missing from checkpoint"});
}

}  // namespace
}  // namespace train
}  // namespace oneflow_like
