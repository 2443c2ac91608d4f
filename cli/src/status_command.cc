// `seam status`: the coordinator's health (grpc.health.v1) and GetMetadata:
// model facts, topology and each stage's health, as text or JSON.
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "grpc_client.h"
#include "client_commands.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli {
namespace {

std::string StripPrefix(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// OK when the coordinator and every stage serve; UNAVAILABLE (ask again
// later) otherwise.
absl::Status ServingStatus(bool all_serving, const std::string& health) {
  if (all_serving) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("not every part is SERVING (coordinator: ", health, ")"));
}

}  // namespace

absl::Status RunStatusCommand(const StatusCommandOptions& o, std::ostream& out) {
  if (o.addr.empty() || o.timeout_s <= 0) {
    return absl::InvalidArgumentError("needs --addr HOST:PORT and --timeout > 0");
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made = security::MakeChannel(o.security, o.addr);
  if (!made.ok()) return made.status();
  const std::shared_ptr<grpc::Channel>& channel = *made;
  std::string health;
  const grpc::Status hs = CheckHealth(channel, "", o.timeout_s, &health);
  if (!hs.ok()) health = "UNREACHABLE (" + DescribeStatus(hs) + ")";
  v1::Metadata m;
  auto context = ContextWithTimeout(o.timeout_s);
  const grpc::Status ms = v1::Coordinator::NewStub(channel)->GetMetadata(context.get(), {}, &m);
  if (!ms.ok()) {
    return CallFailed(
        absl::StrCat("GetMetadata on ", o.addr, " failed: ", DescribeStatus(ms), PlaintextHint(ms, o.security.tls()),
                     "\nhealth: ", health),
        ms);
  }
  bool all_serving = health == "SERVING";
  const v1::ModelFacts& f = m.model();
  const v1::Topology& t = m.topology();
  const std::string dtype = StripPrefix(v1::DType_Name(f.dtype()), "DTYPE_");
  nlohmann::json stages = nlohmann::json::array();
  for (const v1::StageInfo& s : t.stages()) {
    const std::string h = StripPrefix(v1::StageHealth_Name(s.health()), "STAGE_HEALTH_");
    all_serving = all_serving && s.health() == v1::STAGE_HEALTH_SERVING;
    stages.push_back({{"pipeline_rank", s.pipeline_rank()}, {"first_layer", s.first_layer()},
                      {"last_layer", s.last_layer()}, {"host", s.host()}, {"health", h}});
  }
  if (o.json) {
    nlohmann::json doc = {
        {"address", o.addr},
        {"health", health},
        {"model", {{"architecture", f.architecture()}, {"num_layers", f.num_layers()},
                   {"hidden_size", f.hidden_size()}, {"vocab_size", f.vocab_size()},
                   {"max_position_embeddings", f.max_position_embeddings()}, {"dtype", dtype}}},
        {"topology", {{"pipeline_size", t.pipeline_size()}, {"tp_size", t.tp_size()},
                      {"attn_dp_size", t.attn_dp_size()}, {"epoch", t.epoch()}, {"stages", stages}}}};
    out << doc.dump(2) << "\n";
    return ServingStatus(all_serving, health);
  }
  out << "coordinator " << o.addr << ": " << health << "\n"
      << "model: " << f.architecture() << ", " << f.num_layers() << " layers, hidden " << f.hidden_size()
      << ", vocab " << f.vocab_size() << ", max positions " << f.max_position_embeddings() << ", dtype " << dtype
      << "\n"
      << "topology: " << t.pipeline_size() << " stages x TP " << t.tp_size() << " (attention DP "
      << t.attn_dp_size() << "), epoch " << t.epoch() << "\n";
  for (const auto& s : stages) {
    out << "stage " << s["pipeline_rank"].get<int>() << ": layers " << s["first_layer"].get<int>() << "-"
        << s["last_layer"].get<int>() << " on " << s["host"].get<std::string>() << ": "
        << s["health"].get<std::string>() << "\n";
  }
  return ServingStatus(all_serving, health);
}

}  // namespace seam::cli
