#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "schedule/timeline.h"

namespace chimera::schedule {
namespace {

constexpr double kLeft = 60, kTop = 50, kRowHeight = 30, kRowGap = 6;
constexpr double kPlotWidth = 1100;

struct Style {
  const char* fill;
  const char* text;
  const char* name;
};

// Forward light, backward dark; blue down (even chunks), orange up (odd).
Style StyleOf(OpKind op, int chunk) {
  const bool up = chunk % 2 == 1;
  if (op == OpKind::kForward) {
    return up ? Style{"#ffd166", "#222", "forward, up pipeline / odd chunk"}
              : Style{"#8ecae6", "#222", "forward, down pipeline / even chunk"};
  }
  return up ? Style{"#f77f00", "#fff", "backward, up pipeline / odd chunk"}
            : Style{"#1d6fa5", "#fff", "backward, down pipeline / even chunk"};
}

// A tick step of 1, 2 or 5 times a power of ten giving at most ~20 ticks.
double TickStep(double span) {
  double step = std::pow(10.0, std::floor(std::log10(std::max(span, 1e-9) / 20)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (span / (step * m) <= 20) return step * m;
  }
  return step * 10;
}

// The document's opening and the title lines.
std::string SvgHead(const SimulationResult& result, absl::string_view title,
                    double width, double height) {
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
      "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, "
      "Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n",
      width, height, width, height);
  absl::StrAppend(&out, absl::StrFormat(
      "<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s"
      "</text>\n<text x=\"%.0f\" y=\"42\" font-size=\"12\" fill=\"#444\">"
      "makespan %.2f, bubble ratio %.3f, critical path %d F + %d B</text>\n",
      kLeft, title, kLeft, result.makespan, result.bubble_ratio,
      result.critical_forwards, result.critical_backwards));
  return out;
}

// Worker `r`'s row: its label, background, and a labelled box per compute op.
void AppendRow(const Schedule& schedule, const SimulationResult& result, int r,
               double scale, std::string* out) {
  const double y = kTop + r * (kRowHeight + kRowGap);
  absl::StrAppend(
      out,
      absl::StrFormat(
          "<text x=\"%.0f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"end\">P%d"
          "</text>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
          "fill=\"#f4f4f4\"/>\n",
          kLeft - 8, y + kRowHeight / 2 + 4, r, kLeft, y, kPlotWidth,
          kRowHeight));
  const auto& program = schedule.workers[r].instructions;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& inst = program[i];
    if (!IsCompute(inst.op)) continue;
    const InstructionTiming& t = result.workers[r].timings[i];
    const Style style = StyleOf(inst.op, inst.chunk);
    const double x = kLeft + t.start * scale;
    const double w = (t.end - t.start) * scale;
    absl::StrAppend(
        out, absl::StrFormat(
                 "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
                 "fill=\"%s\" stroke=\"#333\" stroke-width=\"0.6\"/>\n",
                 x, y, w, kRowHeight, style.fill));
    const std::string label =
        absl::StrCat(absl::StrJoin(inst.micro_batches, "+"),
                     inst.num_parts > 1 ? absl::StrCat("/", inst.part) : "");
    const double font = std::min(13.0, w / (0.62 * label.size() + 0.4));
    if (font >= 6) {
      absl::StrAppend(
          out, absl::StrFormat(
                   "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.1f\" fill=\"%s\" "
                   "text-anchor=\"middle\">%s</text>\n",
                   x + w / 2, y + kRowHeight / 2 + font / 3, font, style.text,
                   label));
    }
  }
}

void AppendAxis(double span, double scale, double plot_bottom,
                std::string* out) {
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
          "time</text>\n",
          kLeft + kPlotWidth / 2, plot_bottom + 34));
}

void AppendLegend(double plot_bottom, std::string* out) {
  double lx = kLeft;
  const double ly = plot_bottom + 52;
  for (const auto& [op, chunk] :
       {std::pair{OpKind::kForward, 0}, std::pair{OpKind::kBackward, 0},
        std::pair{OpKind::kForward, 1}, std::pair{OpKind::kBackward, 1}}) {
    const Style style = StyleOf(op, chunk);
    absl::StrAppend(
        out, absl::StrFormat("<rect x=\"%.0f\" y=\"%.0f\" width=\"16\" "
                             "height=\"12\" fill=\"%s\" "
                             "stroke=\"#333\" stroke-width=\"0.6\"/>\n<text "
                             "x=\"%.0f\" y=\"%.0f\" "
                             "font-size=\"12\">%s</text>\n",
                             lx, ly, style.fill, lx + 22, ly + 10, style.name));
    lx += 270;
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
  const int rows = static_cast<int>(schedule.workers.size());
  const double span = std::max(result.makespan, 1e-9);
  const double scale = kPlotWidth / span;
  const double plot_bottom = kTop + rows * (kRowHeight + kRowGap);
  std::string out =
      SvgHead(result, title, kLeft + kPlotWidth + 40, plot_bottom + 110);
  for (int r = 0; r < rows; ++r) AppendRow(schedule, result, r, scale, &out);
  AppendAxis(span, scale, plot_bottom, &out);
  AppendLegend(plot_bottom, &out);
  absl::StrAppend(&out, "</svg>\n");
  return out;
}

}  // namespace chimera::schedule
