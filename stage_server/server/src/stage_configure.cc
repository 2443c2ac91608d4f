// The stage actor's configuration messages: Configure checks a config on the
// caller's thread, then loads it (weights, TP group, neighbour endpoints) on
// the actor thread.
#include <algorithm>
#include <utility>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "microbatch_runner.h"
#include "request_checks.h"
#include "seam/core/logging.h"
#include "seam/core/status.h"
#include "seam/server/stage_actor.h"
#include "seam/weights/model_config.h"

namespace seam::server {
namespace {

// `next` is `now` for a later epoch, with neighbours that may have moved
// (a restarted stage has a new UCX worker address).
bool IsNewEpochOf(const v1::StageConfig& now, const v1::StageConfig& next) {
  if (next.epoch() <= now.epoch()) return false;
  v1::StageConfig a = now, b = next;
  for (v1::StageConfig* c : {&a, &b}) {
    c->clear_epoch();
    c->clear_previous_stage();
    c->clear_next_stage();
    c->clear_first_stage();
    c->clear_handoff_key();
  }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace

void StageActor::Configure(const v1::StageConfig& config, StatusCallback done) {
  absl::Status refused;
  v1::StageStatus now;
  bool wait_for_load = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) {
      refused = absl::FailedPreconditionError(
          absl::StrCat("stage is ", v1::StageState_Name(state_), " after Drain; it takes no new configuration"));
    } else if (config_.has_value()) {
      if (state_ != v1::STAGE_STATE_LOADING && IsNewEpochOf(*config_, config)) {
        // The coordinator brings the pipeline back after a failure: drop the
        // loaded stage (KV caches, neighbour endpoints) and load it afresh
        // after the microbatches already queued.
        const std::string previous_key = config_->handoff_key();
        SEAM_LOG_INFO("configure for epoch {} (was {}): reloading once the {} microbatch(es) queued or running end",
                      config.epoch(), config_->epoch(), in_flight_);
        config_ = config;
        state_ = v1::STAGE_STATE_LOADING;
        error_.clear();
        interrupt_ = true;  // a wait of the microbatch running ends now
        mailbox_.push_back([this, config, done, previous_key, asked = absl::Now()] {
          Reload(config, done, previous_key, asked);
        });
        changed_.notify_all();
        return;
      }
      if (!google::protobuf::util::MessageDifferencer::Equals(*config_, config)) {
        refused = absl::FailedPreconditionError(absl::StrCat(
            "stage is already configured (", v1::StageState_Name(state_),
            ") with a different config; only a later epoch of the same layout reloads it, restart the stage "
            "server to change anything else"));
      } else {
        wait_for_load = state_ == v1::STAGE_STATE_LOADING;
      }
    } else {
      refused = CheckStageConfig(config);
      if (refused.ok()) {
        config_ = config;
        state_ = v1::STAGE_STATE_LOADING;
        error_.clear();
        mailbox_.push_back([this, config, done] { Load(config, done); });
        changed_.notify_all();
        return;
      }
    }
    now = StatusLocked();
  }
  if (wait_for_load) {  // the same config again: answer once the first load ends
    Post([this, done] { done(absl::OkStatus(), Status()); });
    return;
  }
  done(refused, now);
}

namespace {

// The endpoints of the stage's data-plane neighbours named in `config`.
struct Neighbours {
  handoff::UcxEndpoint previous, next;
  handoff::UcxEndpoint first;  // the last stage's way to the first, for multi-step decode
};

absl::StatusOr<Neighbours> ConnectNeighbours(handoff::UcxWorker& worker, const v1::StageConfig& config) {
  Neighbours n;
  const std::pair<const v1::WorkerAddress*, handoff::UcxEndpoint*> links[] = {
      {&config.previous_stage(), &n.previous}, {&config.next_stage(), &n.next}, {&config.first_stage(), &n.first}};
  const char* names[] = {"previous_stage", "next_stage", "first_stage"};
  for (size_t i = 0; i < 3; ++i) {
    if (links[i].first->ucx_address().empty()) continue;
    absl::StatusOr<handoff::UcxEndpoint> ep = worker.Connect(links[i].first->ucx_address());
    if (!ep.ok()) return Annotate(ep.status(), absl::StrCat("connecting to ", names[i]));
    *links[i].second = std::move(*ep);
  }
  return n;
}

v1::StageLimits ReportedLimits(const runtime::StepLimits& l) {
  v1::StageLimits r;
  r.set_max_step_tokens(static_cast<uint64_t>(l.max_step_tokens));
  r.set_kv_blocks_per_dp_group(static_cast<uint64_t>(l.kv_blocks_per_dp_group));
  r.set_kv_block_size(static_cast<uint32_t>(l.kv_block_size));
  r.set_state_slots_per_dp_group(static_cast<uint64_t>(l.state_slots_per_dp_group));
  for (int64_t b : l.graph_buckets) r.add_graph_buckets(static_cast<uint64_t>(b));
  r.set_graph_max_context(static_cast<uint64_t>(l.graph_max_context));
  r.set_max_context(static_cast<uint64_t>(l.max_context));
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<runtime::StageGroup>> StageActor::LoadGroup(const v1::StageConfig& config,
                                                                           const weights::ModelConfig& model) {
  SEAM_LOG_INFO("loading layers {}..{} of {} over TP {} (attention DP {}, context-parallel ranks {}), reduction "
                "policy {}, batch variants {}",
                config.first_layer(), config.last_layer(), config.model_dir(), config.tp_size(),
                config.attn_dp_size(), options_.group.attn_cp,
                boundary::ReductionPolicyName(boundary::ResolveReductionPolicy(options_.policy, model.architecture)),
                boundary::VariantChoiceName(options_.group.variants));
  runtime::StageGroupOptions group_options = options_.group;
  group_options.model.first_layer = static_cast<int>(config.first_layer());
  group_options.model.end_layer = static_cast<int>(config.last_layer()) + 1;
  group_options.cache.dtype = group_options.model.dtype;
  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group =
      runtime::StageGroup::Create(config.model_dir(), static_cast<int>(config.tp_size()),
                                  static_cast<int>(config.attn_dp_size()), options_.policy, group_options);
  if (!group.ok()) return Annotate(group.status(), "loading the stage");
  if (const std::string report = (*group)->FusionReport(); !report.empty()) SEAM_LOG_INFO("{}", report);
  const runtime::StepLimits l = (*group)->Limits();
  SEAM_LOG_INFO("step limits: {} token rows; KV cache: {} blocks of {} tokens per attention-DP group; {} Mamba "
                "state slots per attention-DP group; contexts up to {} tokens",
                l.max_step_tokens, l.kv_blocks_per_dp_group, l.kv_block_size, l.state_slots_per_dp_group,
                l.max_context);
  SEAM_LOG_INFO("{}", (*group)->GraphStats().ToString());
  return group;
}

absl::StatusOr<std::unique_ptr<MicrobatchRunner>> StageActor::MakeRunner(const v1::StageConfig& config,
                                                                          const weights::ModelConfig& model,
                                                                          std::unique_ptr<runtime::StageGroup> group,
                                                                          const std::string& previous_key) {
  SEAM_ASSIGN_OR_RETURN(Neighbours n, ConnectNeighbours(*worker_, config));
  const uint64_t max_payload =
      MaxHandoffPayloadBytes(model, static_cast<int>(config.tp_size()), static_cast<int>(config.attn_dp_size()),
                             options_.group.model.dtype, options_.group.kv.max_step_tokens);
  // Device links: a CUDA stage whose handoffs stay on its GPUs; each lane's
  // slot holds one TP rank's share of the handoff bound, at most 256 MiB
  // (a larger handoff takes the host path).
  HandoffLinkOptions links;
  links.device = options_.group.handoff_on_device && group->on_gpu();
  for (uint32_t r = 0; r < config.tp_size(); ++r) links.devices.push_back(options_.group.first_gpu + static_cast<int>(r));
  links.slot_bytes = std::min<uint64_t>(max_payload / std::max<uint32_t>(config.tp_size(), 1), uint64_t{256} << 20);
  auto runner = std::make_unique<MicrobatchRunner>(config, std::move(group), *worker_, std::move(n.previous),
                                                   std::move(n.next), std::move(n.first), options_.handoff_timeout,
                                                   max_payload, options_.metrics, links, previous_key);
  runner->set_run_ahead(options_.run_ahead);
  runner->set_interrupted([this]() -> absl::Status {
    if (!interrupt_) return absl::OkStatus();
    return absl::UnavailableError("the wait was cut short: the stage reloads for a new epoch or stops");
  });
  return runner;
}

void StageActor::Reload(const v1::StageConfig& config, StatusCallback done, const std::string& previous_key,
                        absl::Time asked) {
  interrupt_ = false;
  SEAM_LOG_INFO("reload for epoch {}: {:.3f} s after its Configure (the work ahead of it ended)", config.epoch(),
                absl::ToDoubleSeconds(absl::Now() - asked));
  SetServing(false);
  AnswerUnanswered(absl::UnavailableError("the stage reloads for a new epoch"));
  // What the old epoch left on the data plane goes before the new one starts.
  if (runner_ != nullptr) runner_->DrainForNewEpoch();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runner_ != nullptr) drops_ = runner_->drops();
    drops_before_ += drops_;  // the stage counts over its life
    drops_ = {};
    handoff_in_ = handoff_out_ = v1::HANDOFF_TRANSPORT_UNSPECIFIED;
    last_sequence_number_ = 0;
  }
  runner_.reset();
  Load(config, std::move(done), previous_key);
}

void StageActor::Load(v1::StageConfig config, StatusCallback done, const std::string& previous_key) {
  auto failed = [&](const absl::Status& why) {
    SEAM_LOG_ERROR("configure failed: {}", why.ToString());
    v1::StageStatus s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      state_ = accepting_ ? v1::STAGE_STATE_FAILED : v1::STAGE_STATE_DRAINING;
      error_ = why.ToString();
      s = StatusLocked();
    }
    changed_.notify_all();
    done(absl::OkStatus(), s);
  };
  absl::StatusOr<weights::ModelConfig> model = weights::LoadModelConfig(config.model_dir());
  absl::Status fits = model.ok() ? CheckStageConfigAgainstModel(config, *model)
                                 : absl::InvalidArgumentError(absl::StrCat("model_dir: ", model.status().message()));
  if (!fits.ok()) {  // a config check: nothing was loaded
    v1::StageStatus s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      config_.reset();
      state_ = accepting_ ? v1::STAGE_STATE_UNCONFIGURED : v1::STAGE_STATE_DRAINING;
      s = StatusLocked();
    }
    return done(fits, s);
  }
  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> group = LoadGroup(config, *model);
  if (!group.ok()) return failed(group.status());
  const v1::StageLimits limits = ReportedLimits((*group)->Limits());
  absl::StatusOr<std::unique_ptr<MicrobatchRunner>> runner = MakeRunner(config, *model, std::move(*group), previous_key);
  if (!runner.ok()) return failed(runner.status());
  runner_ = std::move(*runner);
  v1::StageStatus s;
  bool serving = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    serving = accepting_;
    state_ = accepting_ ? v1::STAGE_STATE_READY : v1::STAGE_STATE_DRAINING;
    limits_ = limits;
    kv_free_blocks_.assign(config.attn_dp_size(), limits.kv_blocks_per_dp_group());
    s = StatusLocked();
  }
  changed_.notify_all();
  if (serving) SetServing(true);
  SEAM_LOG_INFO("stage ready: pipeline rank {} of {}, epoch {}", config.pipeline_rank(), config.pipeline_size(),
                config.epoch());
  done(absl::OkStatus(), s);
}

}  // namespace seam::server
