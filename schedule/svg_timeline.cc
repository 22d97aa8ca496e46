#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedule/timeline.h"

namespace chimera::schedule {
namespace {

constexpr double kLeft = 60, kTop = 50, kRowHeight = 30, kRowGap = 6;
constexpr double kPlotWidth = 1100;
constexpr double kLegendEntryWidth = 220;

struct Style {
  const char* fill;
  const char* text;
};

// Forward light, backward (or its input half) dark, a weight half green;
// blue even chunks (down pipelines), orange odd ones (up pipelines).
Style StyleOf(OpKind op, int chunk) {
  const bool odd = chunk % 2 == 1;
  if (op == OpKind::kForward) {
    return odd ? Style{"#ffd166", "#222"} : Style{"#8ecae6", "#222"};
  }
  if (op == OpKind::kBackwardWeight) {
    return odd ? Style{"#8a9a3b", "#fff"} : Style{"#2a9d8f", "#fff"};
  }
  return odd ? Style{"#f77f00", "#fff"} : Style{"#1d6fa5", "#fff"};
}

// A tick step of 1, 2 or 5 times a power of ten giving at most ~20 ticks.
double TickStep(double span) {
  double step = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9) / 20)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (step * m) <= 20) return step * m;
  }
  return step * 10;
}

// The document's opening and its title.
std::string SvgHead(absl::string_view title, double width, double height) {
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, "
      "Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      width, height, width, height);
  absl::StrAppend(&out,
                  absl::StrFormat("<text x=\"%.0f\" y=\"24\" font-size=\"16\" "
                                  "font-weight=\"bold\">%s</text>\n",
                                  kLeft, title));
  return out;
}

// A timeline's summary line, with its baseline at `y`; the critical path
// where the result knows it (a simulation does, a measurement does not).
std::string SvgSummary(const SimulationResult& result, double y) {
  std::string summary = absl::StrFormat("makespan %.4g, bubble ratio %.3f",
                                        result.makespan, result.bubble_ratio);
  if (result.critical_forwards + result.critical_backwards > 0) {
    absl::StrAppend(&summary, absl::StrFormat(", critical path %d F + %d B",
                                              result.critical_forwards,
                                              result.critical_backwards));
  }
  return absl::StrFormat(
      "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" fill=\"#444\">%s</text>\n",
      kLeft, y, summary);
}

// `value` with two digits after the point, through integers: a fifth of
// StrFormat's time, which counts at 65,000 boxes.
void AppendHundredths(double value, std::string& out) {
  int64_t hundredths = std::llround(value * 100);
  if (hundredths < 0) {
    out += '-';
    hundredths = -hundredths;
  }
  const int64_t fraction = hundredths % 100;
  absl::StrAppend(&out, hundredths / 100, fraction < 10 ? ".0" : ".", fraction);
}

// A box of width `w` from (x, y) down one row, as a closed subpath.
void AppendBox(double x, double y, double w, std::string& path) {
  path += 'M';
  AppendHundredths(x, path);
  path += ' ';
  AppendHundredths(y, path);
  path += 'h';
  AppendHundredths(w, path);
  path += 'v';
  AppendHundredths(kRowHeight, path);
  path += 'h';
  AppendHundredths(-w, path);
  path += 'z';
}

// Worker `r`'s row: its label, background, and a labelled box per compute op.
// The boxes of one colour are one path, each box a closed subpath, and the
// labels follow them: a D = 64, N = 512 Chimera timeline took 6.9 MB drawn
// as a rect per box, 2.5 MB so.
void AppendRow(const Schedule& schedule, const SimulationResult& result, int r,
               double top, double scale, std::string* out) {
  const double y = top + r * (kRowHeight + kRowGap);
  absl::StrAppend(
      out,
      absl::StrFormat(
          "<text x=\"%.0f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"end\">P%d"
          "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
          "fill=\"#f4f4f4\"/>\n",
          kLeft - 8, y + kRowHeight / 2 + 4, r, kLeft, y, kPlotWidth,
          kRowHeight));
  // A path per fill, in the order the row first uses them (at most six).
  std::vector<std::pair<absl::string_view, std::string>> boxes_by_fill;
  std::string labels;
  const auto& program = schedule.workers[r].instructions;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& inst = program[i];
    if (!IsCompute(inst.op)) continue;
    const InstructionTiming& t = result.workers[r].timings[i];
    const Style style = StyleOf(inst.op, inst.chunk);
    const double x = kLeft + t.start * scale;
    const double w = (t.end - t.start) * scale;
    auto path = std::find_if(
        boxes_by_fill.begin(), boxes_by_fill.end(),
        [&style](const auto& entry) { return entry.first == style.fill; });
    if (path == boxes_by_fill.end()) {
      path = boxes_by_fill.insert(path, {style.fill, ""});
    }
    AppendBox(x, y, w, path->second);
    const std::string label =
        absl::StrCat(absl::StrJoin(inst.micro_batches, "+"),
                     inst.num_parts > 1 ? absl::StrCat("/", inst.part) : "");
    const double font = std::min(13.0, w / (0.62 * label.size() + 0.4));
    if (font >= 6) {
      absl::StrAppend(
          &labels,
          absl::StrFormat("<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.1f\" "
                          "fill=\"%s\" text-anchor=\"middle\">%s</text>\n",
                          x + w / 2, y + kRowHeight / 2 + font / 3, font,
                          style.text, label));
    }
  }
  for (const auto& [fill, boxes] : boxes_by_fill) {
    absl::StrAppend(out, "<path fill=\"", fill,
                    "\" stroke=\"#333\" stroke-width=\"0.6\" d=\"", boxes,
                    "\"/>\n");
  }
  absl::StrAppend(out, labels);
}

void AppendAxis(double span, double scale, double plot_bottom,
                absl::string_view unit, std::string* out) {
  absl::StrAppend(
      out,
      absl::StrFormat("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
                      "stroke=\"#333\"/>\n",
                      kLeft, plot_bottom, kLeft + kPlotWidth, plot_bottom));
  const double step = TickStep(span);
  for (double tick = 0; tick <= span + 1e-9; tick += step) {
    const double x = kLeft + tick * scale;
    absl::StrAppend(out,
                    absl::StrFormat("<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" "
                                    "y2=\"%.1f\" stroke=\"#333\"/>"
                                    "\n<text x=\"%.2f\" y=\"%.1f\" "
                                    "font-size=\"11\" text-anchor=\"middle\">"
                                    "%g</text>\n",
                                    x, plot_bottom, x, plot_bottom + 5, x,
                                    plot_bottom + 18, tick));
  }
  absl::StrAppend(
      out,
      absl::StrFormat(
          "<text x=\"%.0f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">"
          "%s</text>\n",
          kLeft + kPlotWidth / 2, plot_bottom + 34,
          unit.empty() ? std::string("time")
                       : absl::StrCat("time (", unit, ")")));
}

// One entry per kind of box the schedule has (forward, backward, its
// halves), for even and odd chunks where the schedule has both
// (ChunkNames).
void AppendLegend(const Schedule& schedule, double plot_bottom,
                  std::string* out) {
  double lx = kLeft;
  double ly = plot_bottom + 52;
  const auto chunks = ChunkNames(schedule.topology);
  for (int chunk = 0; chunk < (chunks ? 2 : 1); ++chunk) {
    for (OpKind op : ComputeOpsOf(schedule)) {
      if (lx + kLegendEntryWidth > kLeft + kPlotWidth) {  // a second line
        lx = kLeft;
        ly += 20;
      }
      const std::string name = absl::StrCat(
          OpLegendName(op),
          chunks ? absl::StrCat(", ", chunk == 0 ? chunks->first : chunks->second)
                 : "");
      absl::StrAppend(
          out, absl::StrFormat("<rect x=\"%.0f\" y=\"%.0f\" width=\"16\" "
                               "height=\"12\" fill=\"%s\" "
                               "stroke=\"#333\" stroke-width=\"0.6\"/>\n<text "
                               "x=\"%.0f\" y=\"%.0f\" "
                               "font-size=\"12\">%s</text>\n",
                               lx, ly, StyleOf(op, chunk).fill, lx + 22, ly + 10, name));
      lx += kLegendEntryWidth;
    }
  }
  absl::StrAppend(
      out,
      absl::StrFormat(
          "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" fill=\"#444\">numbers: "
          "micro-batch (a/b: part a of a halved backward); grey: idle</text>\n",
          kLeft, ly + 32));
}

}  // namespace

std::string SvgTimeline(const Schedule& schedule,
                        const SimulationResult& result,
                        absl::string_view title) {
  return SvgTimelines(schedule, {{"", &result}}, title, "");
}

std::string SvgTimelines(const Schedule& schedule,
                         const std::vector<TimelinePanel>& panels,
                         absl::string_view title, absl::string_view unit) {
  const int rows = static_cast<int>(schedule.workers.size());
  double span = 1e-9;
  for (const TimelinePanel& panel : panels) {
    span = std::max(span, panel.result->makespan);
  }
  const double scale = kPlotWidth / span;
  // Each panel: heading, summary, rows, axis; `y` is the next baseline.
  std::string body;
  double y = kTop - 8;
  double plot_bottom = kTop;
  for (const TimelinePanel& panel : panels) {
    if (!panel.title.empty()) {
      absl::StrAppend(
          &body, absl::StrFormat("<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\" "
                                 "font-weight=\"bold\">%s</text>\n",
                                 kLeft, y, panel.title));
      y += 18;
    }
    absl::StrAppend(&body, SvgSummary(*panel.result, y));
    const double top = y + 8;
    for (int r = 0; r < rows; ++r) {
      AppendRow(schedule, *panel.result, r, top, scale, &body);
    }
    plot_bottom = top + rows * (kRowHeight + kRowGap);
    AppendAxis(span, scale, plot_bottom, unit, &body);
    y = plot_bottom + 70;
  }
  AppendLegend(schedule, plot_bottom, &body);
  std::string out = SvgHead(title, kLeft + kPlotWidth + 40, plot_bottom + 110);
  absl::StrAppend(&out, body, "</svg>\n");
  return out;
}

}  // namespace chimera::schedule
