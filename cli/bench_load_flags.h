// The flags of `seam bench load` (bench_load_command.h), registered on the
// `bench` subcommand. Compiled into the seam executable with main.cc (the
// targets that may include CLI11).
#pragma once

#include "bench_load_command.h"

namespace CLI {
class App;
}

namespace seam::cli {

// Adds `load` under `bench`, its flags writing into `options`; returns it
// (parsed() after the parse says it was chosen).
CLI::App* AddBenchLoadCommand(CLI::App& bench, BenchLoadOptions& options);

}  // namespace seam::cli
