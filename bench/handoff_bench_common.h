// What the modes of seam-bench-handoff share (handoff_bench.cc defines
// them): the worker-address swap over a pipe pair, the host path's latency
// measurement, and quantiles. The device mode lives in device_handoff_bench.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "seam/handoff/ucx_worker.h"

namespace seam::bench {

// Creates a worker (PEER over TCP on lo, or NONE: UCX's shared memory),
// swaps addresses over the pipes and connects.
bool ConnectOverPipes(bool tcp, int read_fd, int write_fd, std::unique_ptr<handoff::UcxWorker>& worker,
                      handoff::UcxEndpoint& endpoint);

// Length-prefixed messages over a pipe (reads give up after a minute).
bool WritePipeMessage(int fd, const std::string& s);
bool ReadPipeMessage(int fd, std::string& s);

// The host path's one-way latency of a pending handoff ([tokens, hidden] bf16
// hidden and residual) between two forked processes, from and to GPUs when
// `cuda`: median and p99 in microseconds. Returns 0 on success.
int HostHandoffLatency(bool tcp, bool cuda, int64_t tokens, int64_t hidden, int iters, int warmup, double* median,
                       double* p99);

// The q-quantile (nearest rank) of `v`, which it sorts.
double Quantile(std::vector<double>& v, double q);

// seam-bench-handoff device ...: see device_handoff_bench.cc.
int RunDeviceMode(int argc, char** argv);

}  // namespace seam::bench
