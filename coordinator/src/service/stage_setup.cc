// Stage bring-up over StageControl: GetStatus, Configure, GetStatus until READY.
#include "service/stage_setup.h"

#include <algorithm>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "seam/core/logging.h"

namespace seam::coordinator {
namespace {

using Clock = std::chrono::system_clock;

std::string Describe(const grpc::Status& s) {
  return absl::StrCat(s.error_message(), " (grpc code ", s.error_code(), ")");
}

}  // namespace

absl::StatusOr<std::vector<std::pair<int, int>>> SplitLayers(int num_layers, int stages, const std::string& spec) {
  std::vector<std::pair<int, int>> out;
  if (stages < 1 || num_layers < stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", num_layers, " layers over ", stages, " stages: each needs a layer"));
  }
  if (spec.empty()) {
    int first = 0;
    for (int k = 0; k < stages; ++k) {
      const int n = num_layers / stages + (k < num_layers % stages ? 1 : 0);
      out.emplace_back(first, first + n - 1);
      first += n;
    }
    return out;
  }
  int next = 0;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int a = 0, b = 0;
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) || !absl::SimpleAtoi(ends[1], &b)) {
      return absl::InvalidArgumentError(absl::StrCat("--layers range '", part, "' is not FIRST-LAST"));
    }
    if (a != next || b < a || b >= num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("--layers range '", part, "' must start at layer ", next,
                                                     " and end by layer ", num_layers - 1));
    }
    out.emplace_back(a, b);
    next = b + 1;
  }
  if (static_cast<int>(out.size()) != stages || next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("--layers '", spec, "' must give ", stages,
                                                   " ranges covering layers 0-", num_layers - 1));
  }
  return out;
}

grpc::ChannelArguments StageChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kStageReconnectBackoffMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kStageMaxReconnectBackoffMs);
  return args;
}

absl::StatusOr<std::vector<StageEndpoint>> ConnectStages(const std::vector<std::string>& addresses,
                                                         std::chrono::milliseconds wait,
                                                         const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  std::vector<StageEndpoint> out;
  const auto deadline = Clock::now() + wait;
  for (size_t k = 0; k < addresses.size(); ++k) {
    StageEndpoint e;
    e.address = addresses[k];
    e.stub = v1::StageControl::NewStub(grpc::CreateCustomChannel(e.address, credentials, StageChannelArguments()));
    // In rounds of a few seconds, saying each time what is awaited.
    const auto started = Clock::now();
    grpc::Status s;
    for (;;) {
      grpc::ClientContext context;
      context.set_wait_for_ready(true);
      context.set_deadline(std::min(deadline, Clock::now() + std::chrono::seconds(5)));
      s = e.stub->GetStatus(&context, v1::GetStatusRequest(), &e.status);
      if (s.ok() || Clock::now() >= deadline) break;
      SEAM_LOG_INFO("waiting for stage {} at {} to answer GetStatus ({} of {} s): {}", k, e.address,
                    std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count(),
                    std::chrono::duration_cast<std::chrono::seconds>(wait).count(), Describe(s));
    }
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("stage ", k, " at ", e.address, " did not answer GetStatus within ",
                                                 wait.count(), " ms: ", Describe(s)));
    }
    out.push_back(std::move(e));
  }
  return out;
}

uint64_t AdoptionEpoch(const std::vector<StageEndpoint>& stages) {
  bool configured = false;
  uint64_t latest = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    const v1::StageStatus& s = stages[k].status;
    if (!s.has_config()) continue;
    configured = true;
    latest = std::max(latest, s.config().epoch());
    SEAM_LOG_INFO("adopting stage {} at {}: {} in epoch {}, last sequence number {}", k, stages[k].address,
                  v1::StageState_Name(s.state()), s.config().epoch(), s.last_sequence_number());
  }
  return configured ? latest + 1 : 0;
}

absl::StatusOr<std::string> NewHandoffKey() {
  std::string key(kHandoffKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
    return absl::InternalError(absl::StrCat("RAND_bytes failed: OpenSSL error ", ERR_get_error()));
  }
  return key;
}

absl::Status ConfigureStages(std::vector<StageEndpoint>& stages, const PipelineLayout& layout,
                             std::chrono::milliseconds wait) {
  const int p = static_cast<int>(stages.size());
  const auto deadline = Clock::now() + wait;
  // A fresh key for every epoch: handoffs of an earlier epoch, or from anyone
  // the coordinator did not configure, fail their MAC.
  absl::StatusOr<std::string> key = NewHandoffKey();
  if (!key.ok()) return key.status();
  std::vector<absl::Status> results(p);
  std::vector<std::thread> threads;
  for (int k = 0; k < p; ++k) {
    v1::StageConfig c;
    c.set_model_dir(layout.model_dir);
    c.set_first_layer(layout.layers[k].first);
    c.set_last_layer(layout.layers[k].second);
    c.set_tp_size(layout.tp);
    c.set_attn_dp_size(layout.attn_dp);
    c.set_pipeline_rank(k);
    c.set_pipeline_size(p);
    if (k > 0) *c.mutable_previous_stage() = stages[k - 1].status.worker_address();
    if (k + 1 < p) *c.mutable_next_stage() = stages[k + 1].status.worker_address();
    if (p > 1 && k + 1 == p) *c.mutable_first_stage() = stages[0].status.worker_address();
    c.set_epoch(layout.epoch);
    c.set_handoff_key(*key);
    threads.emplace_back([&, k, c] {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      v1::StageStatus status;
      const grpc::Status s = stages[k].stub->Configure(&context, c, &status);
      if (!s.ok()) {
        results[k] = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                                  absl::StrCat("Configure of stage ", k, " at ", stages[k].address, ": ", Describe(s)));
      } else if (status.state() == v1::STAGE_STATE_FAILED) {
        results[k] = absl::FailedPreconditionError(
            absl::StrCat("stage ", k, " at ", stages[k].address, " failed to configure: ", status.error()));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  for (int k = 0; k < p; ++k) {
    for (;;) {
      grpc::ClientContext context;
      context.set_deadline(deadline);
      const grpc::Status s = stages[k].stub->GetStatus(&context, v1::GetStatusRequest(), &stages[k].status);
      if (!s.ok()) {
        return absl::UnavailableError(absl::StrCat("stage ", k, " at ", stages[k].address, ": ", Describe(s)));
      }
      const v1::StageState state = stages[k].status.state();
      if (state == v1::STAGE_STATE_READY) break;
      if (state == v1::STAGE_STATE_FAILED || state == v1::STAGE_STATE_STOPPED) {
        return absl::FailedPreconditionError(absl::StrCat("stage ", k, " at ", stages[k].address,
                                                          " is not serving: ", stages[k].status.error()));
      }
      if (Clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("stage ", k, " at ", stages[k].address, " not READY within ",
                                                        wait.count(), " ms"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return absl::OkStatus();
}

}  // namespace seam::coordinator
