// The chaos suite's load, figures and process restarts.
#include "chaos_support.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "seam/boundary/reduction_policy.h"
#include "seam/runtime/generator.h"
#include "seam/runtime/stage_group.h"
#include "seam/testing/temp_dir.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/v1/stage_service.grpc.pb.h"

namespace seam::cli::chaos {
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

v1::GenerateRequest Request(const std::string& id, const std::vector<int32_t>& prompt, int max_new) {
  v1::GenerateRequest r;
  r.set_request_id(id);
  r.add_prompts()->mutable_token_ids()->Add(prompt.begin(), prompt.end());
  r.mutable_sampling()->set_max_new_tokens(max_new);
  return r;
}

std::shared_ptr<grpc::Channel> Channel(const LocalPipeline& p, const std::string& target, bool keepalive) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  if (keepalive) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  auto credentials = security::MakeChannelCredentials(p.client_security(), target);
  EXPECT_TRUE(credentials.ok()) << credentials.status();
  return grpc::CreateCustomChannel(target, *credentials, args);
}

}  // namespace

const std::string& ModelDir() {
  static const seam::testing::TempDir dir("seam_chaos_model");
  static const bool written = [] {
    EXPECT_TRUE(WriteDefaultModel(dir.path()).ok());
    return true;
  }();
  (void)written;
  return dir.path();
}

const std::vector<std::vector<int32_t>>& LoadPrompts() {
  static const std::vector<std::vector<int32_t>> prompts = {{3, 14, 15, 92, 65}, {27, 18, 28}, {200, 7}};
  return prompts;
}

const std::vector<std::vector<int32_t>>& ReferenceTokens() {
  static const std::vector<std::vector<int32_t>> tokens = [] {
    auto group = runtime::StageGroup::Create(ModelDir(), 1, 1, boundary::ReductionPolicy::kAuto).value();
    runtime::Generator generator(group.get());
    runtime::GenerationOptions g;
    g.max_new_tokens = kLoadNewTokens;
    g.eos_token_id = -1;
    return generator.Generate(LoadPrompts(), g).value().tokens;
  }();
  return tokens;
}

Load::Load(const LocalPipeline& pipeline, int clients, bool keepalive) : pipeline_(pipeline), keepalive_(keepalive) {
  (void)ReferenceTokens();
  last_end_.assign(clients, Clock::time_point{});
  for (int i = 0; i < clients; ++i) threads_.emplace_back([this, i] { Client(i); });
}

Load::~Load() { Stop(); }

void Load::Stop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<CallRecord> Load::Records() {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

bool Load::InFlightEndedAfter(Clock::time_point fault, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (std::all_of(last_end_.begin(), last_end_.end(), [&](Clock::time_point t) { return t > fault; })) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Load::Client(int index) {
  auto stub = v1::Coordinator::NewStub(Channel(pipeline_, pipeline_.coordinator_address(), keepalive_));
  for (int n = 0; !stop_; ++n) {
    CallRecord r;
    r.prompt = (index + n) % static_cast<int>(LoadPrompts().size());
    r.start = Clock::now();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = stub->Generate(&context, Request(absl::StrCat("load-", index, "-", n), LoadPrompts()[r.prompt],
                                                   kLoadNewTokens));
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      r.tokens.insert(r.tokens.end(), response.token_ids().begin(), response.token_ids().end());
    }
    const grpc::Status s = reader->Finish();
    r.end = Clock::now();
    r.code = s.error_code();
    r.message = s.error_message();
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_.push_back(r);
      last_end_[index] = r.end;
    }
    if (!s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no busy loop while down
  }
}

Figures Judge(const std::string& scenario, const std::vector<CallRecord>& records, Clock::time_point fault) {
  Figures f;
  f.scenario = scenario;
  for (const CallRecord& r : records) {
    const std::vector<int32_t>& want = ReferenceTokens()[r.prompt];
    if (r.code == grpc::StatusCode::OK) {
      ++f.completed;
      const size_t common = std::min(want.size(), r.tokens.size());
      for (size_t i = 0; i < common; ++i) f.lost += want[i] != r.tokens[i];
      if (r.tokens.size() < want.size()) f.lost += static_cast<int>(want.size() - r.tokens.size());
      if (r.tokens.size() > want.size()) f.duplicated += static_cast<int>(r.tokens.size() - want.size());
    } else {
      ++f.failed;
      f.unavailable += r.code == grpc::StatusCode::UNAVAILABLE;
      const bool prefix = r.tokens.size() <= want.size() && std::equal(r.tokens.begin(), r.tokens.end(), want.begin());
      f.bad_prefix += !prefix;
    }
    if (r.start < fault && r.end > fault) {
      f.detection_s = std::max(f.detection_s, Seconds(r.end - fault));
      f.hung += r.end - fault > std::chrono::seconds(10);
    }
  }
  return f;
}

void Print(const Figures& f) {
  std::printf("CHAOS %-36s detection_s=%.2f recovery_s=%.2f completed=%d failed=%d unavailable=%d hung=%d "
              "lost=%d duplicated=%d bad_prefix=%d drops=%lld\n",
              f.scenario.c_str(), f.detection_s, f.recovery_s, f.completed, f.failed, f.unavailable, f.hung, f.lost,
              f.duplicated, f.bad_prefix, static_cast<long long>(f.drops));
  std::fflush(stdout);
}

absl::StatusOr<double> ServedAgainWithin(const LocalPipeline& p, const std::string& target,
                                         std::chrono::milliseconds within) {
  const auto start = Clock::now();
  grpc::Status last(grpc::StatusCode::UNAVAILABLE, "not tried");
  for (int i = 0; Clock::now() - start < within; ++i) {
    auto stub = v1::Coordinator::NewStub(Channel(p, target, false));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GenerateResult result;
    last = stub->GenerateAll(&context, Request(absl::StrCat("probe-", i), LoadPrompts()[0], kLoadNewTokens), &result);
    if (last.ok()) {
      const std::vector<int32_t> got(result.completions(0).token_ids().begin(), result.completions(0).token_ids().end());
      if (got != ReferenceTokens()[0]) return absl::InternalError("served again, but with other tokens");
      return Seconds(Clock::now() - start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::UnavailableError(absl::StrCat("not served again within ", within.count(), " ms: ", last.error_message(),
                                             " (grpc code ", last.error_code(), ")"));
}

std::unique_ptr<LocalPipeline> StartPipeline(std::vector<std::string> stage_args, const std::string& model,
                                             const std::string& stage_timeout, bool http,
                                             std::vector<std::string> coordinator_args) {
  LocalPipelineOptions o;
  o.model_dir = model;
  // SEAM_CHAOS_BIN_DIR: the processes of another build (to show an attempt against it).
  const char* other = std::getenv("SEAM_CHAOS_BIN_DIR");
  o.bin_dir = other != nullptr ? other : SEAM_BIN_DIR;
  o.startup_timeout = std::chrono::seconds(30);
  o.extra_stage_args = std::move(stage_args);
  o.extra_coordinator_args = std::move(coordinator_args);
  o.stage_timeout = stage_timeout;
  if (http) o.http_listen = "127.0.0.1:0";
  auto p = LocalPipeline::Start(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

v1::StageStatus StageStatusOf(const LocalPipeline& p, int k) {
  v1::StageStatus s;
  auto channel = p.StageChannel(k);
  EXPECT_TRUE(channel.ok()) << channel.status();
  if (!channel.ok()) return s;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  const grpc::Status rpc = v1::StageControl::NewStub(*channel)->GetStatus(&context, v1::GetStatusRequest(), &s);
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  return s;
}

int64_t Drops(const v1::StageStatus& s) {
  const v1::HandoffDrops& d = s.handoff_drops();
  return static_cast<int64_t>(d.bad_mac() + d.oversized() + d.malformed() + d.unexpected_microbatch() +
                              d.unknown_peer() + d.unknown_kind() + d.bad_payload() + d.stale_epoch() +
                              d.incomplete());
}

namespace {

int64_t StatusField(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream value(line.substr(field.size() + 1));
    int64_t kib = -1;
    value >> kib;
    return kib;
  }
  return -1;
}

}  // namespace

int64_t RssKiB(pid_t pid) { return StatusField(pid, "VmRSS"); }
int64_t PeakRssKiB(pid_t pid) { return StatusField(pid, "VmHWM"); }

void ResetPeakRss(pid_t pid) {
  std::ofstream out(absl::StrCat("/proc/", pid, "/clear_refs"));
  out << "5";
}

absl::StatusOr<Forger> ConnectForger(const LocalPipeline& p, int k) {
  handoff::UcxWorkerOptions options;
  if (std::getenv("UCX_NET_DEVICES") == nullptr) {
    options.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  } else {
    options.config = {{"TLS", "tcp"}};
  }
  Forger f;
  absl::StatusOr<std::unique_ptr<handoff::UcxWorker>> worker = handoff::UcxWorker::Create(options);
  if (!worker.ok()) return worker.status();
  f.worker = std::move(*worker);
  absl::StatusOr<handoff::UcxEndpoint> endpoint = f.worker->Connect(StageStatusOf(p, k).worker_address().ucx_address());
  if (!endpoint.ok()) return endpoint.status();
  f.endpoint = std::move(*endpoint);
  return f;
}

std::vector<std::string> CommandLine(pid_t pid) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/cmdline"));
  const std::string all((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::string arg;
  for (char c : all) {
    if (c == '\0') {
      argv.push_back(arg);
      arg.clear();
    } else {
      arg.push_back(c);
    }
  }
  return argv;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> Respawn(const LocalPipeline& p, std::vector<std::string> cmdline,
                                                      const std::string& listen, const std::string& name) {
  const std::string port_file = absl::StrCat(p.work_dir(), "/", name, ".port");
  for (size_t i = 0; i + 1 < cmdline.size(); ++i) {
    if (cmdline[i] == "--listen") cmdline[i + 1] = listen;
    if (cmdline[i] == "--port-file") cmdline[i + 1] = port_file;
  }
  auto child = ChildProcess::Spawn(cmdline, absl::StrCat(p.work_dir(), "/", name, ".log"));
  if (!child.ok()) return child.status();
  auto port = (*child)->WaitForPortFile(port_file, std::chrono::seconds(30));
  if (!port.ok()) return port.status();
  return std::move(*child);
}

}  // namespace seam::cli::chaos
