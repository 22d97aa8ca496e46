// The drawings, the JSON report and the CSV reader.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "schedule/csv_io.h"
#include "schedule/json_report.h"
#include "schedule/timeline.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

TEST(TextTimelineTest, DrawsChimeraFigure3RowsWithDirectionsApart) {
  ScheduleParams params = Params(Scheme::kChimera, 4, 4);
  params.backward_slots = 1;
  Schedule s = MustGenerate(params);
  std::string text = TextTimeline(s, MustSimulate(s, 1, 1), "chimera", "time units");
  EXPECT_THAT(text, HasSubstr("P0   |F0 F1 .. f2 b2 f3 b3 B0 .. B1|"));
  EXPECT_THAT(text, HasSubstr("P3   |f2 f3 .. F0 B0 F1 B1 b2 .. b3|"));
  EXPECT_THAT(text, HasSubstr("bubble ratio 0.2000"));
}

TEST(JsonReportTest, HasTheStableFields) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 4, 8));
  SimulationResult r = MustSimulate(s);
  nlohmann::json j = nlohmann::json::parse(JsonReport(s, r, "1f1b"));
  EXPECT_EQ(j["scheme"], "1f1b");
  EXPECT_EQ(j["depth"], 4);
  EXPECT_EQ(j["width"], 1);
  EXPECT_EQ(j["micro_batches"], 8);
  EXPECT_EQ(j["chunks"], 1);
  EXPECT_FALSE(nlohmann::json::parse(JsonReport(s, r)).contains("scheme"));
  EXPECT_DOUBLE_EQ(j["makespan"].get<double>(), r.makespan);
  EXPECT_DOUBLE_EQ(j["bubble_ratio"].get<double>(), 3.0 / 11);
  EXPECT_EQ(j["critical_path"]["forwards"].get<int>(), r.critical_forwards);
  EXPECT_EQ(j["critical_path"]["backwards"].get<int>(), r.critical_backwards);
  ASSERT_EQ(j["workers"].size(), 4u);
  const auto& w0 = j["workers"][0];
  for (const char* key : {"rank", "busy", "idle", "bubble_ratio",
                          "peak_activations", "instructions"}) {
    EXPECT_TRUE(w0.contains(key)) << key;
  }
  EXPECT_EQ(w0["peak_activations"].get<int>(), 4);
  const auto& code = w0["instructions"];
  EXPECT_EQ(code["count"].get<size_t>(), s.workers[0].instructions.size());
  EXPECT_EQ(j["ops"][code["op"][0].get<int>()].get<std::string>(), "FORWARD");
}

// Each column holds one field of every instruction, in program order, with
// the simulated times; the defaults' columns are left out.
TEST(JsonReportTest, ColumnsHoldEveryInstructionsFields) {
  Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 8));
  SimulationResult r = MustSimulate(s);
  const nlohmann::json j = nlohmann::json::parse(JsonReport(s, r));
  for (size_t w = 0; w < s.workers.size(); ++w) {
    const auto& code = j["workers"][w]["instructions"];
    const std::vector<Instruction>& program = s.workers[w].instructions;
    ASSERT_EQ(code["count"].get<size_t>(), program.size());
    for (const char* column :
         {"op", "chunk", "stage", "micro_batches", "peer", "start", "end"}) {
      ASSERT_EQ(code[column].size(), program.size()) << column;
    }
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction& inst = program[i];
      EXPECT_EQ(j["ops"][code["op"][i].get<int>()].get<std::string>(),
                OpName(inst.op));
      EXPECT_EQ(code["chunk"][i].get<int>(), inst.chunk);
      EXPECT_EQ(code["stage"][i].get<int>(), inst.stage);
      EXPECT_EQ(code["peer"][i].get<int>(), inst.peer);
      const nlohmann::json& mbs = code["micro_batches"][i];
      if (inst.micro_batches.size() == 1) {
        EXPECT_EQ(mbs.get<int>(), inst.micro_batches[0]);
      } else {
        EXPECT_EQ(mbs.get<std::vector<int>>(),
                  std::vector<int>(inst.micro_batches.begin(),
                                   inst.micro_batches.end()));
      }
      EXPECT_EQ(code["start"][i].get<double>(), r.workers[w].timings[i].start);
      EXPECT_EQ(code["end"][i].get<double>(), r.workers[w].timings[i].end);
    }
    EXPECT_FALSE(code.contains("part"));
    EXPECT_FALSE(code.contains("recompute"));
  }
}

TEST(JsonReportTest, SlicedAndRecomputedInstructionsGetTheirColumns) {
  ScheduleParams params = Params(Scheme::kChimera, 4, 8);
  params.concat = Concat::kBackwardHalving;
  Schedule s = MustGenerate(params);
  s.workers[0].instructions[0].recompute = true;
  const nlohmann::json j =
      nlohmann::json::parse(JsonReport(s, MustSimulate(s)));
  const auto& rank0 = j["workers"][0]["instructions"];
  EXPECT_TRUE(rank0["recompute"][0].get<bool>());
  EXPECT_EQ(rank0["recompute"].size(), s.workers[0].instructions.size());
  EXPECT_FALSE(j["workers"][1]["instructions"].contains("recompute"));
  bool halved = false;
  for (size_t i = 0; i < s.workers[0].instructions.size(); ++i) {
    const Instruction& inst = s.workers[0].instructions[i];
    EXPECT_EQ(rank0["part"][i].get<int>(), inst.part);
    EXPECT_EQ(rank0["num_parts"][i].get<int>(), inst.num_parts);
    halved = halved || inst.num_parts == 2;
  }
  EXPECT_TRUE(halved) << "backward halving sliced no backward on rank 0";
}

// Times of any size read back exactly, and a worker's figures are numbers.
TEST(JsonReportTest, NumbersReadBackExactly) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 2));
  SimulationResult r = MustSimulate(s);
  r.workers[0].timings[0].end = 0.1 + 0.2;
  r.workers[0].busy = 1e-300;
  r.makespan = 123456789.125;
  const nlohmann::json j = nlohmann::json::parse(JsonReport(s, r));
  EXPECT_EQ(j["workers"][0]["instructions"]["end"][0].get<double>(), 0.1 + 0.2);
  EXPECT_EQ(j["workers"][0]["busy"].get<double>(), 1e-300);
  EXPECT_EQ(j["makespan"].get<double>(), 123456789.125);
}

TEST(SvgTimelineTest, HasLegendAxisAndMicroBatchNumbers) {
  Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  std::string svg = SvgTimeline(s, MustSimulate(s), "chimera D=4 N=4");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
  EXPECT_THAT(svg, HasSubstr("forward, up pipeline"));
  EXPECT_THAT(svg, HasSubstr(">time</text>"));
  EXPECT_THAT(svg, HasSubstr(">3</text>"));
}

// A single pipeline has no "up pipeline" to name, and a looping schedule's
// chunks are model chunks, not pipelines.
TEST(SvgTimelineTest, LegendNamesWhatTheScheduleHas) {
  Schedule single = MustGenerate(Params(Scheme::kOneFOneB, 4, 4));
  std::string svg = SvgTimeline(single, MustSimulate(single), "1f1b");
  EXPECT_THAT(svg, HasSubstr(">forward</text>"));
  EXPECT_THAT(svg, Not(HasSubstr("pipeline")));
  EXPECT_THAT(TextTimeline(single, MustSimulate(single), "1f1b", "time units"),
              HasSubstr("F/B forward/backward, then the micro-batch"));

  ScheduleParams looping = Params(Scheme::kInterleaved, 2, 4);
  looping.chunks = 2;
  Schedule chained = MustGenerate(looping);
  svg = SvgTimeline(chained, MustSimulate(chained), "interleaved");
  EXPECT_THAT(svg, HasSubstr("forward, odd chunk"));
  EXPECT_THAT(svg, Not(HasSubstr("up pipeline")));
}

TEST(CsvTest, HandWrittenScheduleLoadsAndValidates) {
  const char* csv =
      "# chimera-schedule depth=2 width=1 micro_batches=1 chunks=1 layout=chained\n"
      "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute\n"
      "0,STAGE,0,0,,,,,\n"
      "0,FORWARD,0,0,0,,,,\n"
      "0,SEND_ACT,0,0,0,1,,,\n"
      "0,RECV_GRAD,0,0,0,1,,,\n"
      "0,BACKWARD,0,0,0,,,,\n"
      "0,OPTIMIZER_STEP,0,0,,,,,\n"
      "1,STAGE,0,1,,,,,\n"
      "1,RECV_ACT,0,1,0,0,,,\n"
      "1,FORWARD,0,1,0,,,,\n"
      "1,BACKWARD,0,1,0,,,,\n"
      "1,SEND_GRAD,0,1,0,0,,,\n"
      "1,OPTIMIZER_STEP,0,0,,,,,\n";
  absl::StatusOr<Schedule> s = ReadScheduleCsv(csv);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(ValidateSchedule(*s).ok()) << ValidateSchedule(*s);
  EXPECT_NEAR(MustSimulate(*s).makespan, 6, 1e-9);
}

// Defaults are written empty, and empty fields off the end of a row.
TEST(CsvTest, WritesDefaultsAsNothing) {
  Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 1));
  EXPECT_EQ(WriteScheduleCsv(s),
            "# chimera-schedule depth=2 width=1 micro_batches=1 chunks=1 "
            "layout=chained\n"
            "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute\n"
            "0,STAGE,0,0\n"
            "0,FORWARD,0,0,0\n"
            "0,SEND_ACT,0,0,0,1\n"
            "0,RECV_GRAD,0,0,0,1\n"
            "0,BACKWARD,0,0,0\n"
            "0,OPTIMIZER_STEP,0,0\n"
            "1,STAGE,0,1\n"
            "1,RECV_ACT,0,1,0,0\n"
            "1,FORWARD,0,1,0\n"
            "1,BACKWARD,0,1,0\n"
            "1,SEND_GRAD,0,1,0,0\n"
            "1,OPTIMIZER_STEP,0,0\n");
}

TEST(CsvTest, FieldsLeftOffTheEndTakeTheirDefaults) {
  Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 8));
  for (WorkerProgram& w : s.workers) {
    for (Instruction& inst : w.instructions) {
      if (inst.op == OpKind::kForward) inst.recompute = true;
    }
  }
  absl::StatusOr<Schedule> back = ReadScheduleCsv(WriteScheduleCsv(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->topology.NumModelStages(), s.topology.NumModelStages());
  for (size_t r = 0; r < s.workers.size(); ++r) {
    EXPECT_EQ(back->workers[r].stages, s.workers[r].stages);
    EXPECT_EQ(back->workers[r].instructions, s.workers[r].instructions);
  }
}

TEST(CsvTest, AFieldCountOutsideFourToNineNamesTheRange) {
  for (const char* row : {"0,FORWARD,0", "0,FORWARD,0,0,0,,,,,"}) {
    const std::string csv = absl::StrCat(
        "# chimera-schedule depth=1 width=1 micro_batches=1 chunks=1 "
        "layout=chained\n"
        "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute\n",
        row, "\n");
    EXPECT_THAT(std::string(ReadScheduleCsv(csv).status().message()),
                HasSubstr("csv line 3: has "))
        << row;
    EXPECT_THAT(std::string(ReadScheduleCsv(csv).status().message()),
                HasSubstr(" fields, want 4 to 9 (empty ones may be left off "
                          "the end)"))
        << row;
  }
}

TEST(CsvTest, MalformedLinesNameTheLineAndField) {
  EXPECT_THAT(std::string(ReadScheduleCsv("rank,op\n").status().message()),
              HasSubstr("must start with '# chimera-schedule"));
  const char* bad_op =
      "# chimera-schedule depth=1 width=1 micro_batches=1 chunks=1 layout=chained\n"
      "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute\n"
      "0,JUMP,0,0,0,,,,\n";
  EXPECT_THAT(std::string(ReadScheduleCsv(bad_op).status().message()),
              HasSubstr("csv line 3: op 'JUMP' is not one of FORWARD"));
  const char* bad_rank =
      "# chimera-schedule depth=1 width=1 micro_batches=1 chunks=1 layout=chained\n"
      "rank,op,chunk,stage,micro_batches,peer,part,num_parts,recompute\n"
      "5,FORWARD,0,0,0,,,,\n";
  EXPECT_THAT(std::string(ReadScheduleCsv(bad_rank).status().message()),
              HasSubstr("csv line 3: rank 5 outside [0, 1)"));
  // Sizes whose product overflows an int are refused by their product.
  const char* too_many_ranks =
      "# chimera-schedule depth=2147483647 width=2147483647 micro_batches=1 "
      "chunks=1 layout=chained\n";
  EXPECT_THAT(std::string(ReadScheduleCsv(too_many_ranks).status().message()),
              HasSubstr("width x depth = 4611686014132420609 exceeds 65536 ranks"));
}

TEST(ParamErrorMessageTest, SizesBeyondTheEnginesBoundAreRefused) {
  // A billion micro-batches (a global batch of a billion samples of one)
  // would be generated op by op.
  ScheduleParams params = Params(Scheme::kOneFOneB, 4, 1 << 30);
  EXPECT_THAT(std::string(GenerateSchedule(params).status().message()),
              HasSubstr("micro-batches: 1073741824 must be <= 32768"));
}

TEST(ParamErrorMessageTest, InvalidParametersNameTheParameter) {
  ScheduleParams params = Params(Scheme::kChimera, 6, 6);
  params.pipelines = 4;
  EXPECT_THAT(std::string(GenerateSchedule(params).status().message()),
              HasSubstr("pipelines: 4 pipelines need f = 2 to divide D/2 = 3"));
  params = Params(Scheme::kMixPipe, 4, 4);
  params.mixpipe_k = 3;
  EXPECT_THAT(std::string(GenerateSchedule(params).status().message()),
              HasSubstr("mixpipe-k: 3 must be even in [2, D = 4]"));
}

// MixPipe eq. 5 bounds the early forwards by (D-K)/2.
TEST(ParamErrorMessageTest, MixPipeGammaAboveHalfOfDMinusKIsRejected) {
  ScheduleParams params = Params(Scheme::kMixPipe, 8, 8);
  params.mixpipe_k = 4;
  params.mixpipe_gamma = 2;
  EXPECT_TRUE(ValidateScheduleParams(params).empty());
  params.mixpipe_gamma = 3;
  EXPECT_THAT(std::string(GenerateSchedule(params).status().message()),
              HasSubstr("mixpipe-gamma: 3 must be in [0, (D-K)/2 = 2] for "
                        "D = 8, K = 4"));
  params.mixpipe_k = 8;
  params.mixpipe_gamma = 1;
  EXPECT_FALSE(ValidateScheduleParams(params).empty());
}

}  // namespace
}  // namespace chimera::schedule
