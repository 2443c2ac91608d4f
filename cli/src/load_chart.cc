// load_report.h's chart: an SVG document written by hand (axes with round
// ticks, one polyline and labelled points per series, a legend).
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "load_report.h"

namespace seam::cli {
namespace {

constexpr double kWidth = 760, kHeight = 480, kLeft = 80, kRight = 200, kTop = 50, kBottom = 60;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"};

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A round step giving about five ticks up to `max`.
double TickStep(double max) {
  if (!(max > 0)) return 1;
  const double raw = max / 5, power = std::pow(10.0, std::floor(std::log10(raw))), f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

struct Axes {
  double x_max = 1, y_max = 1;
  double X(double v) const { return kLeft + v / x_max * (kWidth - kLeft - kRight); }
  double Y(double v) const { return kHeight - kBottom - v / y_max * (kHeight - kTop - kBottom); }
};

void DrawAxes(const Axes& a, std::string* svg) {
  const double x_step = TickStep(a.x_max), y_step = TickStep(a.y_max);
  absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", kLeft,
                        a.Y(0), a.X(a.x_max), a.Y(0));
  absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", kLeft,
                        a.Y(0), kLeft, a.Y(a.y_max));
  for (double v = 0; v <= a.x_max * 1.0001; v += x_step) {
    absl::StrAppendFormat(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                          a.X(v), a.Y(0) + 16, v);
  }
  for (double v = 0; v <= a.y_max * 1.0001; v += y_step) {
    absl::StrAppendFormat(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g</text>\n",
                          kLeft - 6, a.Y(v) + 4, v);
    absl::StrAppendFormat(svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft,
                          a.Y(v), a.X(a.x_max), a.Y(v));
  }
  absl::StrAppendFormat(svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">p99 ITL (ms)</text>\n",
                        (kLeft + kWidth - kRight) / 2, kHeight - 20);
  absl::StrAppendFormat(svg,
                        "<text x=\"18\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                        "transform=\"rotate(-90 18 %.1f)\">output tokens/s</text>\n",
                        (kTop + kHeight - kBottom) / 2, (kTop + kHeight - kBottom) / 2);
}

}  // namespace

std::string LoadChartSvg(const std::vector<LoadRow>& rows, const std::string& title) {
  std::map<std::string, std::vector<const LoadRow*>> series;  // "variant transport" -> rows in order
  std::vector<std::string> order, left_out;
  Axes axes;
  for (const LoadRow& r : rows) {
    const std::string name = r.variant + " " + r.transport;
    if (!r.figures.itl_ms || r.figures.itl_ms->samples == 0) {
      left_out.push_back(name + " " + r.point.Label());
      continue;
    }
    if (series.find(name) == series.end()) order.push_back(name);
    series[name].push_back(&r);
    axes.x_max = std::max(axes.x_max, r.figures.itl_ms->p99 * 1.1);
    axes.y_max = std::max(axes.y_max, r.figures.output_tok_per_s * 1.1);
  }
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.1f\" y=\"28\" font-size=\"14\">%s</text>\n",
      kWidth, kHeight, kWidth, kHeight, kLeft, Escape(title));
  DrawAxes(axes, &svg);
  for (size_t i = 0; i < order.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string points;
    for (const LoadRow* r : series[order[i]]) {
      const double x = axes.X(r->figures.itl_ms->p99), y = axes.Y(r->figures.output_tok_per_s);
      absl::StrAppendFormat(&points, "%.1f,%.1f ", x, y);
      absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", x, y, color);
      absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\">%s</text>\n", x + 5,
                            y - 5, color, Escape(r->point.Label()));
    }
    absl::StrAppendFormat(&svg, "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"/>\n",
                          points, color);
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" fill=\"%s\">%s</text>\n",
                          kWidth - kRight + 15, kTop + 18.0 * (i + 1), color, Escape(order[i]));
  }
  if (!left_out.empty()) {
    std::string note = "not charted (no ITL seen): ";
    for (size_t i = 0; i < left_out.size(); ++i) note += (i ? ", " : "") + left_out[i];
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\">%s</text>\n", kLeft, kHeight - 4,
                          Escape(note));
  }
  return svg + "</svg>\n";
}

}  // namespace seam::cli
