// `seam bench load`: flags checked, the workload generated, the peaks
// measured (before any pipeline runs), then for each variant a target
// (a LocalPipeline, or the running server) measured at every transport and
// load point; the report last.
#include "bench_load_command.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench_load_setup.h"
#include "command_status.h"
#include "load_report.h"
#include "local_pipeline.h"
#include "seam/core/status.h"
#include "seam/core/temp_dir.h"
#include "stage_busy.h"

namespace seam::cli {
namespace {

using Json = nlohmann::json;

// Where a variant's requests go.
struct Target {
  std::unique_ptr<LocalPipeline> pipeline;  // null for --addr
  std::string grpc, http;
  security::ClientSecurityOptions security;
};

absl::StatusOr<Target> StartTarget(const BenchLoadOptions& o, const LoadVariant& v, const std::string& model_dir,
                                   const std::string& work, std::ostream& out) {
  Target t;
  if (!o.addr.empty()) {
    t.grpc = o.addr, t.http = o.http_addr, t.security = o.security;
    return t;
  }
  LocalPipelineOptions lp;
  lp.model_dir = model_dir;
  lp.work_dir = work;
  lp.pp = o.pp, lp.tp = o.tp, lp.attn_dp = o.attn_dp;
  lp.device = o.device;
  lp.insecure = o.insecure;
  lp.stage_timeout = "60s";
  lp.http_listen = "127.0.0.1:0";
  lp.metrics_port = 0;  // every stage's /metrics, read around each load point (stage_busy.h)
  lp.extra_stage_args = {"--dtype", o.dtype};
  for (const auto* args : {&o.stage_args, &v.stage_args}) {
    lp.extra_stage_args.insert(lp.extra_stage_args.end(), args->begin(), args->end());
  }
  for (const auto* args : {&o.coordinator_args, &v.coordinator_args}) {
    lp.extra_coordinator_args.insert(lp.extra_coordinator_args.end(), args->begin(), args->end());
  }
  std::error_code ec;
  std::filesystem::create_directories(work, ec);
  SEAM_ASSIGN_OR_RETURN(t.pipeline, LocalPipeline::Start(lp));
  t.grpc = t.pipeline->coordinator_address();
  t.http = t.pipeline->http_address();
  t.security = t.pipeline->client_security();
  out << "variant " << v.label << ": seam-coordinator at " << t.grpc << " (HTTP " << t.http << ") over " << o.pp
      << " seam-stage (logs in " << work << ")\n"
      << std::flush;
  return t;
}

absl::StatusOr<std::unique_ptr<LoadTransport>> MakeTransport(const std::string& name, const Target& t) {
  if (name == "grpc") return MakeGrpcLoadTransport(t.grpc, t.security);
  if (t.http.empty()) {
    return absl::InvalidArgumentError("the http transport needs the server's HTTP API address: pass --http-addr");
  }
  return MakeHttpLoadTransport(t.http, t.security);
}

// A few short requests of their own (other prompts than the measured ones,
// so nothing they leave in a cache helps the measurement).
absl::Status Warmup(LoadTransport& transport, const BenchLoadOptions& o, int64_t vocab, const std::string& label) {
  if (o.warmup < 1) return absl::OkStatus();
  WorkloadOptions w;
  w.sessions = o.warmup;
  w.prompt = LengthDistribution{LengthDistribution::Kind::kFixed, 16, 16, 16};
  w.output = LengthDistribution{LengthDistribution::Kind::kFixed, 4, 4, 4};
  w.vocab = vocab;
  w.seed = o.seed + 0x5741524d;
  SEAM_ASSIGN_OR_RETURN(const Workload warm, GenerateWorkload(w));
  LoadPoint point;
  point.concurrency = o.warmup;
  LoadRunOptions run;
  run.request_timeout_s = o.timeout_s;
  run.id_prefix = absl::StrCat("warmup-", label);
  absl::StatusOr<std::vector<RequestRecord>> records = RunLoadPoint(transport, warm, point, run);
  if (records.ok()) return absl::OkStatus();
  return absl::Status(AfterFlags(records.status().code()), absl::StrCat("warm-up: ", records.status().message()));
}

// Every stage's counters now; none for --addr (its stages are not ours to reach).
std::vector<absl::StatusOr<StageCounters>> ScrapeStages(const Target& t) {
  std::vector<absl::StatusOr<StageCounters>> out;
  if (!t.pipeline) return out;
  for (int k = 0;; ++k) {
    const std::string address = t.pipeline->stage_metrics_address(k);
    if (address.empty()) return out;
    out.push_back(ScrapeStageCounters(address, t.pipeline->client_security()));
  }
}

struct Context {
  const BenchLoadOptions& options;
  const Workload& workload;
  const LoadSetup& setup;
  std::ostream& out;
};

absl::Status MeasureTarget(const Context& c, const LoadVariant& v, Target& target, std::vector<LoadRow>* rows) {
  int64_t served = 0;  // points this target ran before: each shifts its prompts' tokens past theirs
  for (const std::string& name : c.setup.transports) {
    SEAM_ASSIGN_OR_RETURN(std::unique_ptr<LoadTransport> transport, MakeTransport(name, target));
    SEAM_RETURN_IF_ERROR(Warmup(*transport, c.options, c.workload.options.vocab, v.label));
    for (size_t p = 0; p < c.setup.points.size(); ++p) {
      const LoadPoint& point = c.setup.points[p];
      LoadRunOptions run;
      run.request_timeout_s = c.options.timeout_s;
      run.arrival_seed = c.options.seed;
      run.id_prefix = absl::StrCat("load-", v.label, "-", name, "-p", p);
      run.progress_every_s = c.options.progress_s;
      run.progress = &std::cerr;
      run.token_shift = served++;
      const std::vector<absl::StatusOr<StageCounters>> before = ScrapeStages(target);
      absl::StatusOr<std::vector<RequestRecord>> records = RunLoadPoint(*transport, c.workload, point, run);
      const std::vector<absl::StatusOr<StageCounters>> after = ScrapeStages(target);
      if (!records.ok()) {
        const std::string tails = target.pipeline ? "\n" + target.pipeline->LogTails(10) : "";
        return absl::Status(AfterFlags(records.status().code()),
                            absl::StrCat("variant ", v.label, ", ", name, ", ", point.Label(), ": ",
                                         records.status().message(), tails));
      }
      LoadRow row{v.label, name, point, SummarizeLoad(*records, c.setup.target), std::nullopt, {}};
      row.ideal = c.setup.Ideal(c.workload, point, c.options.seed);
      for (size_t k = 0; k < before.size() && k < after.size(); ++k) {
        row.stages.push_back(StageBusyBetween(static_cast<int>(k), before[k], after[k], row.figures.duration_s));
      }
      c.out << absl::StrFormat("  %s %s: %d requests in %.4g s, %.1f output tok/s%s\n", name, point.Label(),
                               row.figures.requests, row.figures.duration_s, row.figures.output_tok_per_s,
                               row.ideal ? absl::StrFormat(", %.2fx the ideal %.4g s",
                                                           row.figures.duration_s / row.ideal->seconds,
                                                           row.ideal->seconds)
                                         : "");
      for (const StageBusy& stage : row.stages) {
        c.out << "    stage " << stage.stage << ": " << StageBusyCell(stage)
              << (stage.error.empty() ? "" : " (" + stage.error + ")") << "\n";
      }
      c.out << std::flush;
      rows->push_back(std::move(row));
    }
  }
  return absl::OkStatus();
}

Json ReportJson(const Context& c, const std::vector<LoadRow>& rows, const std::string& model_dir) {
  Json runs = Json::array();
  for (const LoadRow& r : rows) runs.push_back(LoadRowJson(rows, r));
  Json out = c.setup.Describe(c.options, c.workload, model_dir);
  out["runs"] = runs;
  return out;
}

absl::Status WriteOutputs(const Context& c, const std::vector<LoadRow>& rows, const std::string& model_dir) {
  if (!c.options.json_out.empty()) {
    std::ofstream json(c.options.json_out);
    json << ReportJson(c, rows, model_dir).dump(2) << "\n";
    if (!json) return absl::PermissionDeniedError(absl::StrCat("cannot write --json ", c.options.json_out));
  }
  if (!c.options.svg_out.empty()) {
    std::ofstream svg(c.options.svg_out);
    svg << LoadChartSvg(rows, absl::StrCat("seam bench load: ", WorkloadShapeName(c.workload.options), ", ",
                                           c.workload.requests(), " requests, ", c.setup.model_summary));
    if (!svg) return absl::PermissionDeniedError(absl::StrCat("cannot write --svg ", c.options.svg_out));
  }
  return absl::OkStatus();
}

// Removes the run's directory (the random model, the pipelines' logs unless
// --logs-dir) however the run ends; a failure's message carries the logs' tails.
struct WorkDir {
  std::string path;
  ~WorkDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

absl::Status RunBenchLoadCommand(const BenchLoadOptions& given, std::ostream& out) {
  const BenchLoadOptions o = WithSmokeDefaults(given);
  SEAM_ASSIGN_OR_RETURN(const std::string work, MakeTempDir("seam-bench-load"));
  const WorkDir remove_at_end{work};
  SEAM_ASSIGN_OR_RETURN(const std::string model_dir, PrepareModel(o, work));
  SEAM_ASSIGN_OR_RETURN(LoadSetup setup, LoadSetup::Make(o, model_dir));
  SEAM_ASSIGN_OR_RETURN(const Workload workload, GenerateWorkload(setup.workload));
  setup.MeasurePeaks(o, workload, out);
  out << setup.Banner(o, workload) << std::flush;
  const Context c{o, workload, setup, out};
  std::vector<LoadRow> rows;
  for (size_t i = 0; i < setup.variants.size(); ++i) {
    const LoadVariant& v = setup.variants[i];
    const std::string logs = o.logs_dir.empty() ? work : o.logs_dir;
    absl::StatusOr<Target> target = StartTarget(o, v, model_dir, absl::StrCat(logs, "/variant", i), out);
    if (!target.ok()) return Annotate(target.status(), absl::StrCat("variant ", v.label));
    const absl::Status measured = MeasureTarget(c, v, *target, &rows);
    if (target->pipeline) target->pipeline->Stop();
    SEAM_RETURN_IF_ERROR(measured);
  }
  SEAM_RETURN_IF_ERROR(WriteOutputs(c, rows, model_dir));
  out << "\n";
  PrintLoadTables(rows, out);
  out << setup.Notes();
  return absl::OkStatus();
}

}  // namespace seam::cli
