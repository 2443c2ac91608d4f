// stage_busy.h: the counters read from a stage's page, their differences,
// and the scrape itself (cpp-httplib, HTTPS with the pipeline's CA).
#include "stage_busy.h"

#include <httplib.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace seam::cli {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxPageBytes = size_t{4} << 20;
constexpr char kStepSum[] = "seam:stage_step_seconds_sum";
constexpr char kStepCount[] = "seam:stage_step_seconds_count";
constexpr char kStepsTotal[] = "seam:stage_steps_total";

int64_t Count(double v) { return static_cast<int64_t>(std::llround(v)); }

}  // namespace

absl::StatusOr<StageCounters> StageCountersOf(const std::vector<PrometheusSample>& samples) {
  StageCounters c;
  bool sum = false, count = false;
  for (const PrometheusSample& s : samples) {
    const bool is_sum = s.name == kStepSum, is_count = s.name == kStepCount;
    if (is_sum || is_count) {
      const std::string kind = s.Label("kind");
      for (StageCounters::Steps* steps : {&c.all, kind.empty() ? nullptr : &c.by_kind[kind]}) {
        if (steps != nullptr) (is_sum ? steps->seconds : steps->count) += s.value;
      }
      (is_sum ? sum : count) = true;
    } else if (s.name == kStepsTotal) {
      const std::string mode = s.Label("mode");
      if (mode == "graph") c.graph_steps += s.value;
      if (mode == "eager") c.eager_steps += s.value;
    }
  }
  if (!sum || !count) return absl::NotFoundError(absl::StrCat("no ", kStepSum, " and ", kStepCount, " samples"));
  return c;
}

StageBusy StageBusyBetween(int stage, const absl::StatusOr<StageCounters>& before,
                           const absl::StatusOr<StageCounters>& after, double duration_s) {
  StageBusy b;
  b.stage = stage;
  if (!before.ok()) {
    b.error = absl::StrCat("before the run: ", before.status().ToString());
    return b;
  }
  if (!after.ok()) {
    b.error = absl::StrCat("after the run: ", after.status().ToString());
    return b;
  }
  const StageCounters &x = *before, &y = *after;
  if (y.all.seconds < x.all.seconds || y.all.count < x.all.count || y.graph_steps < x.graph_steps ||
      y.eager_steps < x.eager_steps) {
    b.error = "the stage's counters went back during the run (did it restart?)";
    return b;
  }
  const auto share = [&](double seconds) { return duration_s > 0 ? seconds / duration_s : 0.0; };
  b.busy_s = y.all.seconds - x.all.seconds;
  b.steps = Count(y.all.count - x.all.count);
  b.graph_steps = Count(y.graph_steps - x.graph_steps);
  b.eager_steps = Count(y.eager_steps - x.eager_steps);
  b.busy_fraction = share(b.busy_s);
  b.mean_step_ms = b.steps > 0 ? 1e3 * b.busy_s / static_cast<double>(b.steps) : 0;
  for (const auto& [kind, steps] : y.by_kind) {
    const auto was = x.by_kind.find(kind);
    const StageCounters::Steps zero;
    const StageCounters::Steps& from = was == x.by_kind.end() ? zero : was->second;
    StageBusy::Kind k;
    k.busy_s = steps.seconds - from.seconds;
    k.steps = Count(steps.count - from.count);
    k.busy_fraction = share(k.busy_s);
    b.by_kind[kind] = k;
  }
  return b;
}

Json StageBusyJson(const StageBusy& b) {
  if (!b.error.empty()) {
    return {{"stage", b.stage}, {"busy_s", nullptr}, {"busy_fraction", nullptr}, {"steps", nullptr},
            {"graph_steps", nullptr}, {"eager_steps", nullptr}, {"mean_step_ms", nullptr}, {"by_kind", nullptr},
            {"error", b.error}};
  }
  Json kinds = nullptr;
  if (!b.by_kind.empty()) {
    kinds = Json::object();
    for (const auto& [name, k] : b.by_kind) {
      kinds[name] = {{"busy_s", k.busy_s}, {"busy_fraction", k.busy_fraction}, {"steps", k.steps}};
    }
  }
  return {{"stage", b.stage}, {"busy_s", b.busy_s}, {"busy_fraction", b.busy_fraction}, {"steps", b.steps},
          {"graph_steps", b.graph_steps}, {"eager_steps", b.eager_steps}, {"mean_step_ms", b.mean_step_ms},
          {"by_kind", kinds}, {"error", nullptr}};
}

std::string StageBusyCell(const StageBusy& b) {
  if (!b.error.empty()) return "n/a";
  std::vector<std::string> kinds;
  for (const char* name : {"decode", "mixed", "prefill"}) {
    const auto k = b.by_kind.find(name);
    if (k != b.by_kind.end() && k->second.steps > 0) {
      kinds.push_back(absl::StrFormat("%s %.2f", name, k->second.busy_fraction));
    }
  }
  return absl::StrFormat("busy %.2f (%d steps, %d graph, %.3g ms/step%s)", b.busy_fraction, b.steps, b.graph_steps,
                         b.mean_step_ms, kinds.empty() ? "" : "; " + absl::StrJoin(kinds, ", "));
}

absl::StatusOr<StageCounters> ScrapeStageCounters(const std::string& address,
                                                  const security::ClientSecurityOptions& security) {
  const std::string base = absl::StrCat(security.tls() ? "https://" : "http://", address);
  httplib::Client client(base);
  if (!security.tls_ca_file.empty()) {
    client.set_ca_cert_path(security.tls_ca_file.c_str());
    client.enable_server_certificate_verification(true);
  }
  client.set_connection_timeout(std::chrono::seconds(5));
  client.set_read_timeout(std::chrono::seconds(10));
  std::string body;
  int status = 0;
  bool too_big = false;
  const httplib::Result got = client.Get(
      "/metrics",
      [&](const httplib::Response& response) {
        status = response.status;
        return true;
      },
      [&](const char* data, size_t n) {
        if (body.size() + n > kMaxPageBytes) return !(too_big = true);
        body.append(data, n);
        return true;
      });
  const std::string what = absl::StrCat("GET ", base, "/metrics");
  if (too_big) return absl::ResourceExhaustedError(absl::StrCat(what, ": the page is over ", kMaxPageBytes, " bytes"));
  if (!got) return absl::UnavailableError(absl::StrCat(what, ": ", httplib::to_string(got.error())));
  if (status != 200) return absl::InternalError(absl::StrCat(what, ": HTTP ", status, ": ", body.substr(0, 200)));
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(body);
  if (!samples.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", samples.status().message()));
  absl::StatusOr<StageCounters> counters = StageCountersOf(*samples);
  if (!counters.ok()) return absl::Status(counters.status().code(), absl::StrCat(what, ": ", counters.status().message()));
  return counters;
}

}  // namespace seam::cli
