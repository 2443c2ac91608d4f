// `seam demo`: the kernels and collectives demo. N rank threads join a real
// Gloo group over TCP loopback (rendezvous through a FileStore in a fresh
// temporary directory), run a tensor-parallel norm + MLP block on random data
// and compare every rank's result with a single-rank reference.
#pragma once

#include <cstdint>
#include <ostream>

namespace seam::cli {

struct DemoCommandOptions {
  int ranks = 2;        // rank threads (one Gloo group)
  int64_t rows = 7;     // token rows
  int64_t hidden = 96;  // hidden size
  uint64_t seed = 1;    // random data seed
};

// Exit codes: 0 every rank matched the reference ("demo OK" is printed);
// 1 a mismatch or a failed op/collective (named on `err`); 2 bad arguments.
int RunDemoCommand(const DemoCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace seam::cli
