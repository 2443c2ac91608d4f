// Runs the handoff bandwidth children of `seam bench pipeline`: per transport
// and size, ucx_perftest (server + client on 127.0.0.1), then seam's handoff,
// then seam's raw tagged send, each with the same iterations and warm-up.
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
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "child_process.h"

namespace seam::coordinator {
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

// ucx_perftest -f -v prints a CSV header and one row; overall_bw is column 6 (MiB/s).
absl::StatusOr<double> PerftestBandwidth(const std::string& mode, size_t size, int iters, int warmup,
                                         const std::string& log_prefix) {
  absl::Status last = absl::OkStatus();
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string port = std::to_string(FreePort());
    const std::vector<std::string> common = {"-t", "tag_bw", "-s", std::to_string(size), "-n",
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
      if (cols.size() >= 6) return std::stod(cols[5]);
    }
    last = absl::InternalError(absl::StrCat("ucx_perftest ", mode, " ", size, " bytes gave no bandwidth; see ", clog));
  }
  return last;
}

absl::StatusOr<double> SeamBandwidth(const std::string& mode, const std::string& kind, size_t size, int iters,
                                     int warmup, const std::string& log) {
  auto child = ChildProcess::Spawn({ExecutableDir() + "/seam-bench-handoff", mode, kind, std::to_string(size),
                                    std::to_string(iters), std::to_string(warmup)},
                                   log);
  if (!child.ok()) return child.status();
  const bool ok = Finish(**child, std::chrono::seconds(180));
  std::vector<std::string> lines = absl::StrSplit(ReadFile(log), '\n', absl::SkipWhitespace());
  if (!ok || lines.empty()) {
    return absl::InternalError(absl::StrCat("seam-bench-handoff ", mode, " ", kind, " ", size, " failed; see ", log));
  }
  return std::stod(lines.back());
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

}  // namespace seam::coordinator
