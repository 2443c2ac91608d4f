// The ideal time of a load: the same sessions, arrivals and concurrency as
// a load point, served by a machine that prefills at its measured matmul
// peak and decodes at its measured copy bandwidth, doing nothing else.
//
// How it is composed: the sessions are replayed in simulated time. Whenever
// requests are ready (arrived, a session slot free in a closed loop, the
// previous turn answered), each is prefilled, one after another, in
// StepFloor::Prefill(prompt).total() / flops_per_s (its whole prompt,
// history included: no prefix reuse); the prefill makes its first token.
// Then one decode step advances every request in flight by one token in
// StepFloor::DecodeStep(batch, context).total() / bytes_per_s: the weights
// (and the experts the batch touches) read once, each sequence's KV over its
// context read and the new token's written, Mamba state read and written.
// With nothing in flight the clock jumps to the next arrival. Pipeline
// stages count in series (a step passes every layer), which is the bound
// for stages sharing a device; stages on their own GPUs could overlap
// microbatches and do better.
//
// For the serving-under-load figures (256 requests of 64-1,024 prompt tokens,
// 139,503 in all, 128 new tokens each, all in flight, 8-layer hidden-4096
// bf16 Qwen3): the prefills take 4.37e14 FLOPs (4.31e14 in matmuls, 6.3e12 in
// causal attention, the lm_head on 256 last rows), 0.52 s at 841 TFLOP/s;
// then 127 steps at batch 256 read 3.35 GB of weights and 4.6-5.6 GB of KV
// each, about 2.0 ms at 4.25 TB/s, 0.25 s: 0.77 s in all (load_ideal_test).
// The rounder 0.9 s counts 128 steps and 5.0e14 FLOPs, near what
// the lm_head on every prompt row and non-causal attention would add
// (4.8e14): neither is work a prefill must do.
#pragma once

#include <cstdint>
#include <vector>

#include "load_runner.h"
#include "load_workload.h"
#include "seam/runtime/step_floor.h"

namespace seam::cli {

struct IdealRates {
  double flops_per_s = 0;  // matmul peak of the device one rank computes on
  double bytes_per_s = 0;  // copy bandwidth of the memory one rank reads
  // Ranks that share that peak and bandwidth (CPU ranks of one host: every
  // TP rank; GPUs: 1, each rank has its own).
  int ranks_sharing = 1;
};

struct IdealLoad {
  double seconds = 0;          // the last answer's end
  double prefill_seconds = 0;  // of which prefilling
  double decode_seconds = 0;   // of which decode steps
  double idle_seconds = 0;     // of which waiting for arrivals
  int64_t decode_steps = 0;
  double prefill_flops = 0;    // per rank, over every prefill
  double decode_bytes = 0;     // per rank, over every step
};

// `arrivals`: each session's arrival offset (SessionArrivals). Closed loop:
// at most point.concurrency sessions in flight.
IdealLoad IdealLoadTime(const Workload& workload, const LoadPoint& point, const std::vector<double>& arrivals,
                        const runtime::StepFloor& floor, const IdealRates& rates);

}  // namespace seam::cli
