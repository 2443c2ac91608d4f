// `seam generate` (alias `seam submit`) and `seam status`: gRPC clients of a
// running seam-coordinator's Coordinator service and grpc.health.v1.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace seam::cli {

struct GenerateCommandOptions {
  std::string addr;                  // HOST:PORT of the coordinator
  std::vector<std::string> prompts;  // token ids separated by spaces or commas, e.g. "3 14 15"
  int max_new_tokens = 16;
  float temperature = 0;             // 0: greedy
  int top_k = 0;                     // 0: off
  float top_p = 1;                   // 1: off
  uint64_t seed = 0;
  bool stream = false;               // Generate (streamed) instead of GenerateAll
  bool json = false;                 // one JSON document on stdout
  double timeout_s = 60;
};

// Exit codes: 0 OK; 1 the call failed (the gRPC code name is printed); 2 bad arguments.
int RunGenerateCommand(const GenerateCommandOptions& options, std::ostream& out, std::ostream& err);

struct StatusCommandOptions {
  std::string addr;
  bool json = false;
  double timeout_s = 5;
};

// Exit codes: 0 the coordinator and every stage are SERVING; 1 unreachable or
// something not serving (the report is still printed); 2 bad arguments.
int RunStatusCommand(const StatusCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace seam::cli
