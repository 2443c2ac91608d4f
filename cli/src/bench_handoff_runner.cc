// Runs the handoff children of `seam bench pipeline`. Bandwidth: per transport
// and size, ucx_perftest tag_bw (server + client on 127.0.0.1), then seam's
// handoff, then seam's raw tagged send. Latency: per transport and token
// count, ucx_perftest tag_lat at the handoff's payload bytes, then seam's
// handoff ping-pong. Each pair uses the same iterations and warm-up.
#include "bench_handoff_runner.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "child_process.h"

namespace seam::cli {
namespace {

// A TCP port free at the moment of asking, for ucx_perftest's exchange.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for `child` to exit by itself; kills it after `timeout`. True on exit 0.
bool Finish(ChildProcess& child, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (child.Running() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const int status = child.Stop(std::chrono::milliseconds(200));
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// `env` prefix that gives ucx_perftest the transport seam uses in that mode:
// PEER mode pins TCP on lo; NONE mode leaves UCX its own (shared-memory) choice.
std::vector<std::string> UcxEnv(const std::string& mode) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  if (mode == "tcp") argv.insert(argv.end(), {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo"});
  return argv;
}

// ucx_perftest -f -v prints a CSV header and one row; returns that row's
// columns. tag_bw: overall_bw is column 6 (MiB/s). tag_lat: column 2 is the
// 50th percentile one-way latency (us).
absl::StatusOr<std::vector<std::string>> PerftestRow(const std::string& test, const std::string& mode, size_t size,
                                                     int iters, int warmup, const std::string& log_prefix) {
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string port = std::to_string(FreePort());
    const std::vector<std::string> common = {"-t", test, "-s", std::to_string(size), "-n",
                                             std::to_string(iters), "-w", std::to_string(warmup),
                                             "-p", port, "-f", "-v"};
    std::vector<std::string> server = UcxEnv(mode), client = UcxEnv(mode);
    server.push_back("ucx_perftest");
    server.insert(server.end(), common.begin(), common.end());
    client.insert(client.end(), {"ucx_perftest", "127.0.0.1"});
    client.insert(client.end(), common.begin(), common.end());
    const std::string slog = log_prefix + "-server.log", clog = log_prefix + "-client.log";
    std::remove(clog.c_str());
    auto s = ChildProcess::Spawn(server, slog);
    if (!s.ok()) return s.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(200 * (attempt + 1)));
    auto c = ChildProcess::Spawn(client, clog);
    if (!c.ok()) return c.status();
    const bool ok = Finish(**c, std::chrono::seconds(120));
    Finish(**s, std::chrono::seconds(5));
    const std::string text = ReadFile(clog);
    std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
    if (ok && lines.size() >= 2 && lines[lines.size() - 2].rfind("iterations,", 0) == 0) {
      std::vector<std::string> cols = absl::StrSplit(lines.back(), ',');
      if (cols.size() >= 6) return cols;
    }
    last = absl::InternalError(absl::StrCat("ucx_perftest ", test, " ", mode, " ", size, " bytes gave no result; see ",
                                            clog));
  }
  return last;
}

absl::StatusOr<double> PerftestBandwidth(const std::string& mode, size_t size, int iters, int warmup,
                                         const std::string& log_prefix) {
  auto row = PerftestRow("tag_bw", mode, size, iters, warmup, log_prefix);
  if (!row.ok()) return row.status();
  return std::stod((*row)[5]);
}

absl::StatusOr<double> PerftestLatency(const std::string& mode, size_t size, int iters, int warmup,
                                       const std::string& log_prefix) {
  auto row = PerftestRow("tag_lat", mode, size, iters, warmup, log_prefix);
  if (!row.ok()) return row.status();
  return std::stod((*row)[1]);
}

// Runs seam-bench-handoff with `args`; returns the last line it printed.
absl::StatusOr<std::string> SeamBench(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {ExecutableDir() + "/seam-bench-handoff"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = ChildProcess::Spawn(argv, log);
  if (!child.ok()) return child.status();
  const bool ok = Finish(**child, std::chrono::seconds(180));
  std::vector<std::string> lines = absl::StrSplit(ReadFile(log), '\n', absl::SkipWhitespace());
  if (!ok || lines.empty()) {
    return absl::InternalError(absl::StrCat("seam-bench-handoff ", absl::StrJoin(args, " "), " failed; see ", log));
  }
  return lines.back();
}

absl::StatusOr<double> SeamBandwidth(const std::string& mode, const std::string& kind, size_t size, int iters,
                                     int warmup, const std::string& log) {
  auto line = SeamBench({mode, kind, std::to_string(size), std::to_string(iters), std::to_string(warmup)}, log);
  if (!line.ok()) return line.status();
  return std::stod(*line);
}

// {median, p99} one-way microseconds of seam's handoff ping-pong on the host.
absl::StatusOr<std::pair<double, double>> SeamLatency(const std::string& mode, int64_t tokens, int64_t hidden,
                                                      int iters, int warmup, const std::string& log) {
  auto line = SeamBench({"latency", mode, std::to_string(tokens), std::to_string(hidden), std::to_string(iters),
                         std::to_string(warmup), "cpu"},
                        log);
  if (!line.ok()) return line.status();
  std::istringstream in(*line);
  double median = 0, p99 = 0;
  if (!(in >> median >> p99) || median <= 0 || p99 <= 0) {
    return absl::InternalError(absl::StrCat("seam-bench-handoff latency ", mode, " ", tokens,
                                            " printed no latency ('", *line, "'); see ", log));
  }
  return std::make_pair(median, p99);
}

}  // namespace

absl::StatusOr<nlohmann::json> MeasureHandoffBandwidth(bool quick, const std::string& work_dir, std::ostream& out) {
  nlohmann::json results = nlohmann::json::array();
  out << "handoff bandwidth, MiB/s (sender side, N messages after warm-up; ratio = seam / ucx_perftest tag_bw)\n"
      << "  tcp: UCX_TLS=tcp UCX_NET_DEVICES=lo, seam in PEER mode; shm: UCX defaults, seam in NONE mode\n"
      << "  mode      size  iters   ucx_perftest   seam handoff (ratio)   seam raw send (ratio)\n";
  for (const std::string mode : {"tcp", "shm"}) {
    std::vector<size_t> sizes = {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, size_t{4} << 20};
    if (quick) sizes = {size_t{64} << 10, size_t{1} << 20};
    for (size_t size : sizes) {
      const int full = static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / size, 64, 1000));
      const int iters = quick ? std::max(4, full / 32) : full;
      const int warmup = std::max(2, iters / 10);
      const std::string tag = absl::StrCat(work_dir, "/", mode, "-", size);
      auto perf = PerftestBandwidth(mode, size, iters, warmup, tag + "-perftest");
      if (!perf.ok()) return perf.status();
      auto handoff = SeamBandwidth(mode, "handoff", size, iters, warmup, tag + "-handoff.log");
      if (!handoff.ok()) return handoff.status();
      auto raw = SeamBandwidth(mode, "raw", size, iters, warmup, tag + "-raw.log");
      if (!raw.ok()) return raw.status();
      std::ostringstream line;
      line << std::fixed << std::setprecision(1) << "  " << std::left << std::setw(4) << mode << std::right
           << std::setw(8) << (size >> 10) << "K" << std::setw(7) << iters << std::setw(15) << *perf << std::setw(15)
           << *handoff << " (x" << std::setprecision(2) << *handoff / *perf << ")" << std::setprecision(1)
           << std::setw(15) << *raw << " (x" << std::setprecision(2) << *raw / *perf << ")\n";
      out << line.str() << std::flush;
      results.push_back({{"mode", mode}, {"bytes", size}, {"iters", iters}, {"warmup", warmup},
                         {"ucx_perftest_mib_s", *perf}, {"seam_handoff_mib_s", *handoff},
                         {"seam_raw_mib_s", *raw}, {"handoff_ratio", *handoff / *perf},
                         {"raw_ratio", *raw / *perf}});
    }
  }
  return results;
}

absl::StatusOr<nlohmann::json> MeasureHandoffLatency(bool quick, const std::string& work_dir, std::ostream& out) {
  constexpr int64_t kHidden = 1024;
  nlohmann::json results = nlohmann::json::array();
  out << "\nhandoff latency, one-way us = round trip / 2 (a pending handoff: StreamState header + bf16 hidden and\n"
      << "  residual [tokens, " << kHidden << "] on the host, CRC-32C; ratio = seam / ucx_perftest tag_lat at the "
      << "payload size,\n  its 50th percentile; tcp and shm as above)\n"
      << "  mode  tokens   payload  iters   ucx_perftest    seam median (ratio)      seam p99 (ratio)\n";
  for (const std::string mode : {"tcp", "shm"}) {
    std::vector<int64_t> token_counts = {1, 8, 64, 256, 1024};
    if (quick) token_counts.pop_back();
    for (int64_t tokens : token_counts) {
      const size_t payload = static_cast<size_t>(2 * tokens * kHidden) * 2;  // two bf16 tensors
      const int iters = quick ? 100 : static_cast<int>(std::clamp<size_t>((size_t{256} << 20) / payload, 100, 1000));
      const int warmup = std::max(10, iters / 10);
      const std::string tag = absl::StrCat(work_dir, "/lat-", mode, "-", tokens);
      auto perf = PerftestLatency(mode, payload, iters, warmup, tag + "-perftest");
      if (!perf.ok()) return perf.status();
      auto ours = SeamLatency(mode, tokens, kHidden, iters, warmup, tag + "-handoff.log");
      if (!ours.ok()) return ours.status();
      const auto [median, p99] = *ours;
      std::ostringstream line;
      line << std::fixed << std::setprecision(1) << "  " << std::left << std::setw(4) << mode << std::right
           << std::setw(8) << tokens << std::setw(9) << (payload >> 10) << "K" << std::setw(7) << iters
           << std::setw(15) << *perf << std::setw(15) << median << " (x" << std::setprecision(2) << median / *perf
           << ")" << std::setprecision(1) << std::setw(14) << p99 << " (x" << std::setprecision(2) << p99 / *perf
           << ")\n";
      out << line.str() << std::flush;
      results.push_back({{"mode", mode}, {"tokens", tokens}, {"hidden", kHidden}, {"dtype", "bf16"},
                         {"payload_bytes", payload}, {"iters", iters}, {"warmup", warmup},
                         {"ucx_perftest_median_us", *perf}, {"seam_median_us", median}, {"seam_p99_us", p99},
                         {"median_ratio", median / *perf}, {"p99_ratio", p99 / *perf}});
    }
  }
  return results;
}

}  // namespace seam::cli
