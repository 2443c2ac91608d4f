// `seam demo`: the kernels and collectives demo. N rank threads join a real
// Gloo group over TCP loopback (rendezvous through a FileStore in a fresh
// temporary directory), run a tensor-parallel norm + MLP block on random data
// and compare every rank's result with a single-rank reference.
#pragma once

#include <cstdint>
#include <ostream>

#include "absl/status/status.h"

namespace seam::cli {

struct DemoCommandOptions {
  int ranks = 2;        // rank threads (one Gloo group)
  int64_t rows = 7;     // token rows
  int64_t hidden = 96;  // hidden size
  uint64_t seed = 1;    // random data seed
};

// Prints the report on `out`, ending in "demo OK" when every rank matched the
// reference. INVALID_ARGUMENT (exit 2): a bad flag; INTERNAL (exit 1): a
// mismatch; any other error (exit 1): the failed op or collective, named.
absl::Status RunDemoCommand(const DemoCommandOptions& options, std::ostream& out);

}  // namespace seam::cli
