// One rank's share of a schedule: what it is told of the others (stages,
// the most parts, a digest that changes with any instruction), and that the
// share survives the wire while a share that does not fit is refused.
#include "schedule/rank_schedule.h"

#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/program_proto.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::testing::HasSubstr;
using testing::MustGenerate;
using testing::Params;

// Chimera D = 4, N = 8 with backward halving, at W = 2: every rank holds
// two stage replicas and splits backwards in two.
Schedule ChimeraHalving() {
  ScheduleParams params = Params(Scheme::kChimera, 4, 8);
  params.width = 2;
  params.concat = Concat::kBackwardHalving;
  return MustGenerate(params);
}

TEST(RankScheduleTest, TheOutlineListsEveryRanksStagesAndTheMostParts) {
  const Schedule s = ChimeraHalving();
  const ScheduleOutline outline = OutlineOf(s);
  EXPECT_EQ(outline.world_size(), 8);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(outline.stages_by_rank[rank], s.workers[rank].stages) << rank;
  }
  EXPECT_EQ(outline.max_parts, 2);
  EXPECT_EQ(OutlineOf(MustGenerate(Params(Scheme::kOneFOneB, 2, 4))).max_parts,
            1);
  const RankSchedule mine = RankScheduleOf(s, 5);
  EXPECT_EQ(mine.rank(), 5);
  EXPECT_EQ(mine.program.instructions, s.workers[5].instructions);
  EXPECT_EQ(mine.outline.digest, outline.digest);
}

TEST(RankScheduleTest, TheDigestChangesWithAnyFieldOfAnyInstruction) {
  const Schedule s = ChimeraHalving();
  const std::string digest = ScheduleDigest(s);
  EXPECT_THAT(digest, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(ScheduleDigest(ChimeraHalving()), digest) << "deterministic";
  const std::vector<void (*)(Instruction&)> edits = {
      [](Instruction& i) { i.op = OpKind::kForward; },
      [](Instruction& i) { ++i.chunk; },
      [](Instruction& i) { ++i.stage; },
      [](Instruction& i) { i.micro_batches.push_back(0); },
      [](Instruction& i) { ++i.peer; },
      [](Instruction& i) { ++i.part; },
      [](Instruction& i) { ++i.num_parts; },
      [](Instruction& i) { i.recompute = !i.recompute; },
  };
  for (size_t e = 0; e < edits.size(); ++e) {
    Schedule edited = s;
    // The last rank's first backward: not a forward already.
    for (Instruction& inst : edited.workers.back().instructions) {
      if (IsBackward(inst.op)) {
        edits[e](inst);
        break;
      }
    }
    EXPECT_NE(ScheduleDigest(edited), digest) << "edit " << e;
  }
  Schedule swapped = s;
  std::swap(swapped.workers[0].instructions[0],
            swapped.workers[0].instructions[1]);
  EXPECT_NE(ScheduleDigest(swapped), digest) << "order matters";
  Schedule narrower = s;
  narrower.topology.micro_batches = 7;
  EXPECT_NE(ScheduleDigest(narrower), digest);
}

TEST(RankScheduleTest, AShareSurvivesTheWire) {
  const Schedule s = ChimeraHalving();
  const chimera::v1::ScheduleOutline outline = ToProto(OutlineOf(s));
  const std::vector<chimera::v1::WorkerProgram> programs = ToProto(s);
  for (int rank = 0; rank < 8; ++rank) {
    absl::StatusOr<RankSchedule> mine =
        RankScheduleFromProto(outline, programs[rank]);
    ASSERT_TRUE(mine.ok()) << mine.status();
    const RankSchedule expected = RankScheduleOf(s, rank);
    EXPECT_EQ(mine->rank(), rank);
    EXPECT_EQ(mine->program.stages, expected.program.stages);
    EXPECT_EQ(mine->program.instructions, expected.program.instructions);
    EXPECT_EQ(mine->outline.stages_by_rank, expected.outline.stages_by_rank);
    EXPECT_EQ(mine->outline.max_parts, 2);
    EXPECT_EQ(mine->outline.digest, expected.outline.digest);
    const Topology& topology = mine->topology();
    EXPECT_EQ(topology.depth, 4);
    EXPECT_EQ(topology.num_chunks, s.topology.num_chunks);
    EXPECT_EQ(topology.layout, s.topology.layout);
    EXPECT_EQ(topology.micro_batches, 8);
    EXPECT_EQ(topology.width, 2);
  }
}

TEST(RankScheduleTest, AnAsynchronousShareKeepsItsUpdateRuleOnTheWire) {
  const std::optional<Schedule> s =
      MustGenerate(Params(Scheme::kPipeDream2Bw, 2, 2));
  const chimera::v1::ScheduleOutline outline = ToProto(OutlineOf(*s));
  EXPECT_EQ(outline.update_rule(), "double-buffered");
  EXPECT_TRUE(outline.repeating());
  const absl::StatusOr<RankSchedule> mine =
      RankScheduleFromProto(outline, ToProto(*s)[1]);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(mine->topology().update_rule, UpdateRule::kDoubleBuffered);
  EXPECT_TRUE(mine->topology().repeating);
  EXPECT_EQ(mine->program.instructions, s->workers[1].instructions);
  // The rule is part of what the ranks agree on.
  Schedule synchronous = *s;
  synchronous.topology.update_rule = UpdateRule::kSynchronous;
  synchronous.topology.repeating = false;
  EXPECT_NE(ScheduleDigest(synchronous), ScheduleDigest(*s));
}

TEST(RankScheduleTest, AShareThatDoesNotFitIsRefusedNamingWhy) {
  const Schedule s = ChimeraHalving();
  const chimera::v1::ScheduleOutline good = ToProto(OutlineOf(s));
  const chimera::v1::WorkerProgram program = ToProto(s)[3];
  struct Case {
    std::string why;
    void (*edit)(chimera::v1::ScheduleOutline&, chimera::v1::WorkerProgram&);
  };
  const std::vector<Case> cases = {
      {"chunk layout 'spiral'",
       [](auto& o, auto&) { o.set_chunk_layout("spiral"); }},
      {"must be at least 1 in each", [](auto& o, auto&) { o.set_width(0); }},
      {"lists the stages of 7 ranks; its topology has 8",
       [](auto& o, auto&) { o.mutable_ranks()->RemoveLast(); }},
      {"chunk 0 stage 4, outside its topology",
       [](auto& o, auto&) {
         o.mutable_ranks(0)->mutable_stages(0)->set_chunk(0);
         o.mutable_ranks(0)->mutable_stages(0)->set_stage(4);
       }},
      {"update rule 'eager' is not one of",
       [](auto& o, auto&) { o.set_update_rule("eager"); }},
      {"repeats one step, but its update rule is synchronous",
       [](auto& o, auto&) { o.set_repeating(true); }},
      {"both must be set", [](auto& o, auto&) { o.clear_digest(); }},
      {"both must be set", [](auto& o, auto&) { o.set_max_parts(0); }},
      {"program rank 8 outside [0, 8)", [](auto&, auto& p) { p.set_rank(8); }},
      {"other stages than the schedule outline says",
       [](auto&, auto& p) { p.mutable_stages()->RemoveLast(); }},
      {"is not an operation",
       [](auto&, auto& p) {
         p.mutable_instructions(0)->set_op(static_cast<chimera::v1::Op>(99));
       }},
  };
  for (const Case& c : cases) {
    chimera::v1::ScheduleOutline outline = good;
    chimera::v1::WorkerProgram edited = program;
    c.edit(outline, edited);
    const absl::StatusOr<RankSchedule> mine =
        RankScheduleFromProto(outline, edited);
    EXPECT_EQ(mine.status().code(), absl::StatusCode::kInvalidArgument)
        << c.why;
    EXPECT_THAT(mine.status().message(), HasSubstr(c.why));
  }
}

}  // namespace
}  // namespace chimera::schedule
