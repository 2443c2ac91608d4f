// `seam serve` as a user runs it: a child process serving PP 2 x TP 1, then
// `seam generate --json` and `seam status` against it, then SIGTERM: serve
// must exit 0 and leave none of its seam-stage / seam-coordinator children.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "child_process.h"
#include "seam/testing/temp_dir.h"

namespace seam::cli {
namespace {

struct SeamRun {
  int exit_code = -1;
  std::string output;  // stdout only
};

SeamRun RunSeam(const std::string& args) {
  SeamRun run;
  FILE* pipe = popen((std::string(SEAM_BINARY) + " " + args).c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

// Processes whose parent is `pid`, from /proc/*/stat.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == pid) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

TEST(SeamServe, GenerateAndStatusThenSigtermLeavesNoChildren) {
  const std::string bin = std::filesystem::path(SEAM_BINARY).parent_path();
  if (!std::filesystem::exists(bin + "/seam-stage")) GTEST_SKIP() << "seam-stage is not built";
  const seam::testing::TempDir dir("seam_serve_test");  // outlives the serve process
  const std::string port_file = dir.File("port"), log = dir.File("serve.log");
  auto serve = ChildProcess::Spawn({SEAM_BINARY, "serve", "--pp", "2", "--tp", "1", "--port-file", port_file}, log);
  ASSERT_TRUE(serve.ok()) << serve.status();
  auto port = (*serve)->WaitForPortFile(port_file, std::chrono::seconds(90));
  ASSERT_TRUE(port.ok()) << port.status();
  // serve prints the CA and token a client needs: "... --tls-ca PATH --auth-token-file PATH ...".
  std::string printed;
  {
    std::ifstream f(log);
    printed.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const size_t at = printed.find(" --tls-ca ");
  ASSERT_NE(at, std::string::npos) << printed;
  const size_t end = printed.find(" --prompt", at);
  ASSERT_NE(end, std::string::npos) << printed;
  const std::string credentials = printed.substr(at, end - at);
  const std::string addr = "127.0.0.1:" + std::to_string(*port) + credentials;

  // Without the token the call is refused; without TLS it cannot connect.
  const SeamRun no_token = RunSeam("generate --addr 127.0.0.1:" + std::to_string(*port) + " --tls-ca " +
                                   credentials.substr(10, credentials.find(' ', 10) - 10) + " --prompt '3' 2>&1");
  EXPECT_EQ(no_token.exit_code, 1) << no_token.output;
  EXPECT_NE(no_token.output.find("UNAUTHENTICATED"), std::string::npos) << no_token.output;
  const SeamRun plaintext = RunSeam("generate --addr 127.0.0.1:" + std::to_string(*port) + " --prompt '3' 2>&1");
  EXPECT_EQ(plaintext.exit_code, 1) << plaintext.output;
  EXPECT_NE(plaintext.output.find("UNAVAILABLE"), std::string::npos) << plaintext.output;

  const SeamRun gen =
      RunSeam("generate --addr " + addr + " --prompt '3 14 15' --prompt '7 8' --max-new-tokens 6 --json");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  const nlohmann::json doc = nlohmann::json::parse(gen.output);
  ASSERT_EQ(doc.at("completions").size(), 2u) << gen.output;
  for (const auto& c : doc.at("completions")) {
    EXPECT_EQ(c.at("tokens").size(), 6u) << gen.output;
    EXPECT_EQ(c.at("finish_reason"), "max_new_tokens") << gen.output;
  }
  const SeamRun stream = RunSeam("submit --addr " + addr + " --prompt '3 14 15' --max-new-tokens 6 --stream --json");
  ASSERT_EQ(stream.exit_code, 0) << stream.output;
  EXPECT_EQ(nlohmann::json::parse(stream.output).at("completions").at(0).at("tokens"),
            doc.at("completions").at(0).at("tokens"));  // greedy: the same tokens
  EXPECT_EQ(RunSeam("generate --addr " + addr + " --prompt '3 100000' 2>/dev/null").exit_code, 1);
  EXPECT_EQ(RunSeam("generate --addr " + addr + " --prompt 'x' 2>/dev/null").exit_code, 2);

  const SeamRun status = RunSeam("status --addr " + addr);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("stage 0: layers 0-1"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("stage 1: layers 2-3"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("SERVING"), std::string::npos) << status.output;

  const std::vector<pid_t> children = ChildrenOf((*serve)->pid());
  EXPECT_EQ(children.size(), 3u) << "two seam-stage and one seam-coordinator";
  const int wait_status = (*serve)->Stop(std::chrono::seconds(30));  // SIGTERM first
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << "wait status " << wait_status;
  for (pid_t c : children) {
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(c))) << "child " << c << " left behind";
  }
  std::ifstream f(log);
  const std::string out((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("serving on 127.0.0.1:" + std::to_string(*port)), std::string::npos) << out;
  EXPECT_NE(out.find("seam serve: stopped"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(port_file));
}

// A second `seam serve` on the port the first holds: it exits 1 naming the
// port, before it starts anything, and the first keeps serving. (Before,
// gRPC's SO_REUSEPORT let both bind it: the kernel split the calls.)
TEST(SeamServe, ASecondServeOnATakenPortExitsNamingItAndTheFirstKeepsServing) {
  const std::string bin = std::filesystem::path(SEAM_BINARY).parent_path();
  if (!std::filesystem::exists(bin + "/seam-stage")) GTEST_SKIP() << "seam-stage is not built";
  const seam::testing::TempDir dir("seam_serve_taken_port");
  const std::string port_file = dir.File("port"), log = dir.File("serve.log");
  auto serve = ChildProcess::Spawn({SEAM_BINARY, "serve", "--pp", "2", "--tp", "1", "--port-file", port_file}, log);
  ASSERT_TRUE(serve.ok()) << serve.status();
  auto port = (*serve)->WaitForPortFile(port_file, std::chrono::seconds(90));
  ASSERT_TRUE(port.ok()) << port.status();
  const SeamRun second = RunSeam("serve --pp 2 --tp 1 --port " + std::to_string(*port) + " 2>&1");
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find("address already in use (port " + std::to_string(*port) + ")"), std::string::npos)
      << second.output;
  std::string printed;
  {
    std::ifstream f(log);
    printed.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const size_t at = printed.find(" --tls-ca ");
  ASSERT_NE(at, std::string::npos) << printed;
  const std::string credentials = printed.substr(at, printed.find(" --prompt", at) - at);
  const SeamRun gen = RunSeam("generate --addr 127.0.0.1:" + std::to_string(*port) + credentials +
                              " --prompt '3 14 15' --max-new-tokens 2 --json");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_TRUE((*serve)->Running());
  (*serve)->Stop(std::chrono::seconds(30));
}

}  // namespace
}  // namespace seam::cli
