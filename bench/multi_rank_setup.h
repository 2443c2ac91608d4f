// What a seam-bench-gpu mode with one thread per GPU rank opens first (bench/
// only): the checkpoint of --checkpoint and a file store for the ranks'
// rendezvous (--store, default /tmp/seam-bench-NAME-PID). Prints what failed
// and returns nullopt when either cannot be opened.
#pragma once

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "gpu_bench_util.h"
#include "seam/comm/store.h"
#include "seam/weights/checkpoint.h"

namespace seam::bench {

struct MultiRankSetup {
  std::unique_ptr<weights::Checkpoint> checkpoint;
  std::shared_ptr<comm::Store> store;
};

inline std::optional<MultiRankSetup> OpenMultiRank(const Flags& flags, const std::string& path,
                                                   const std::string& name) {
  auto checkpoint = weights::Checkpoint::Open(path);
  if (!checkpoint.ok()) {
    std::cerr << "checkpoint: " << checkpoint.status() << "\n";
    return std::nullopt;
  }
  auto store = comm::MakeFileStore(flags.Get("store", "/tmp/seam-bench-" + name + "-" + std::to_string(::getpid())));
  if (!store.ok()) {
    std::cerr << "store: " << store.status() << "\n";
    return std::nullopt;
  }
  return MultiRankSetup{*std::move(checkpoint), *std::move(store)};
}

}  // namespace seam::bench
