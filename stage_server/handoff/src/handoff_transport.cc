// The transport table of stage-to-stage links (see handoff_transport.h).
#include "seam/handoff/handoff_transport.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace seam::handoff {
namespace {

absl::Status No(absl::string_view why) { return absl::FailedPreconditionError(why); }

absl::Status CudaIpcCanConnect(const v1::DeviceLinkOffer* offer, const ConsumerFacts& facts) {
  if (offer == nullptr) return No("the producer offers no device link");
  if (!facts.cuda_ipc_built) return No("this build has no CUDA path");
  if (facts.reachable.empty()) return No("this stage computes on the host");
  if (offer->host_id().empty() || offer->host_id() != facts.host_id) {
    return No(absl::StrCat("the producer runs on another host ('", offer->host_id(), "', here '", facts.host_id,
                           "')"));
  }
  if (offer->pid() == facts.pid) return No("the producer is this process (IPC handles open only in another)");
  if (static_cast<size_t>(offer->lanes_size()) != facts.reachable.size()) {
    return No(absl::StrCat("the producer offers ", offer->lanes_size(), " lanes, this stage has ",
                           facts.reachable.size(), " TP ranks"));
  }
  if (offer->slot_bytes() == 0) return No("the offer's slots hold no bytes");
  const int slots = offer->lanes(0).slot_memory_size();
  if (slots < 2) return No(absl::StrCat("the offer has ", slots, " slots; a ring needs at least 2"));
  for (int l = 0; l < offer->lanes_size(); ++l) {
    const v1::DeviceLane& lane = offer->lanes(l);
    if (lane.slot_memory_size() != slots || lane.slot_events_size() != slots) {
      return No(absl::StrCat("lane ", l, " offers ", lane.slot_memory_size(), " buffers and ",
                             lane.slot_events_size(), " events for ", slots, " slots"));
    }
    if (facts.reachable[l].count(lane.pci_bus_id()) == 0) {
      return No(absl::StrCat("lane ", l, ": GPU ", lane.pci_bus_id(),
                             " is not visible to this stage's GPU, or it has no peer access to it"));
    }
  }
  return absl::OkStatus();
}

absl::Status HostUcxCanConnect(const v1::DeviceLinkOffer*, const ConsumerFacts&) { return absl::OkStatus(); }

constexpr TransportRow kTable[] = {
    {v1::HANDOFF_TRANSPORT_CUDA_IPC, "cuda_ipc", &CudaIpcCanConnect},
    {v1::HANDOFF_TRANSPORT_HOST_UCX, "host_ucx", &HostUcxCanConnect},
};

}  // namespace

absl::Span<const TransportRow> TransportTable() { return kTable; }

TransportChoice ChooseTransport(const v1::DeviceLinkOffer* offer, const ConsumerFacts& facts) {
  TransportChoice choice;
  std::vector<std::string> passed;
  for (const TransportRow& row : TransportTable()) {
    const absl::Status can = row.can_connect(offer, facts);
    if (can.ok()) {
      choice.transport = row.transport;
      break;
    }
    passed.push_back(absl::StrCat(row.name, ": ", can.message()));
  }
  choice.passed_over = absl::StrJoin(passed, "; ");
  return choice;
}

const char* TransportName(v1::HandoffTransport transport) {
  for (const TransportRow& row : TransportTable()) {
    if (row.transport == transport) return row.name;
  }
  return "none";
}

std::string LocalHostId() {
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return absl::StrCat(absl::StripAsciiWhitespace(boot), "/", name);
}

}  // namespace seam::handoff
