// DeviceHandoffReceiver over CUDA IPC (see device_handoff.h): weighing and
// answering offers, opening the producer's handles, and taking each
// handoff's payloads from its slot into tensors on this stage's GPUs.
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "seam/core/cuda_check.h"
#include "seam/core/device_memory.h"
#include "seam/core/status.h"
#include "seam/handoff/device_handoff.h"
#include "src/device_lane.h"
#include "src/device_placement.h"
#include "src/tensor_desc.h"

namespace seam::handoff {
namespace {

using device::CopySpan;
using device::DeviceLane;
using device::DeviceScope;

std::string BusId(int device) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return bus;
}

class DeviceHandoffReceiverImpl final : public DeviceHandoffReceiver {
 public:
  DeviceHandoffReceiverImpl(UcxWorker& worker, UcxEndpoint& endpoint, DeviceLinkOptions options)
      : worker_(worker), endpoint_(endpoint), options_(std::move(options)) {}
  ~DeviceHandoffReceiverImpl() override { Close(); }

  absl::Status Init() {
    facts_.cuda_ipc_built = true;
    facts_.host_id = LocalHostId();
    facts_.pid = static_cast<int64_t>(getpid());
    int count = 0;
    SEAM_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
    for (int device : options_.devices) {
      SEAM_ASSIGN_OR_RETURN(std::unique_ptr<DeviceLane> lane, DeviceLane::Create(device));
      lanes_.push_back(std::move(lane));
      std::set<std::string>& reachable = facts_.reachable.emplace_back();
      reachable.insert(BusId(device));
      for (int other = 0; other < count; ++other) {
        int can = 0;
        if (other != device && cudaDeviceCanAccessPeer(&can, device, other) == cudaSuccess && can) {
          reachable.insert(BusId(other));
        }
        cudaGetLastError();
      }
    }
    return absl::OkStatus();
  }

  const ConsumerFacts& facts() const override { return facts_; }
  const std::vector<uint64_t>& last_checksums() const override { return last_checksums_; }
  v1::HandoffTransport transport() const override {
    return link_id_ != 0 ? v1::HANDOFF_TRANSPORT_CUDA_IPC : v1::HANDOFF_TRANSPORT_HOST_UCX;
  }

  absl::StatusOr<TransportChoice> Answer(const v1::DeviceLinkOffer& offer, absl::Time deadline) override {
    if (auto it = answered_.find(offer.link_id()); it != answered_.end()) return it->second;
    TransportChoice choice = ChooseTransport(&offer, facts_);
    if (choice.transport == v1::HANDOFF_TRANSPORT_CUDA_IPC) {
      Close();
      const absl::Status opened = Open(offer);
      if (!opened.ok()) {
        Close();
        choice.transport = v1::HANDOFF_TRANSPORT_HOST_UCX;
        choice.passed_over = absl::StrCat("cuda_ipc: ", opened.message());
      }
    }
    answered_[offer.link_id()] = choice;
    v1::DeviceLinkReply reply;
    reply.set_link_id(offer.link_id());
    reply.set_epoch(options_.epoch);
    reply.mutable_answer()->set_accepted(choice.transport == v1::HANDOFF_TRANSPORT_CUDA_IPC);
    reply.mutable_answer()->set_reason(choice.passed_over);
    SEAM_RETURN_IF_ERROR(SendDeviceLinkReply(worker_, endpoint_, reply, options_.key, deadline));
    return choice;
  }

  absl::StatusOr<std::vector<Tensor>> Take(const v1::StreamState& header, absl::Time deadline) override {
    const v1::DeviceSlot& ds = header.device_slot();
    SEAM_RETURN_IF_ERROR(CheckLink(header));
    if (absl::Status placed = CheckSlotPlacement(header, static_cast<int>(lanes_.size()), slots(), slot_bytes_);
        !placed.ok()) {
      SEAM_RETURN_IF_ERROR(Release(ds, deadline));
      return placed;
    }
    // Tensors of this stage's own, on each lane's GPU, allocated on the lane's stream.
    const int lanes = static_cast<int>(lanes_.size());
    std::vector<Tensor> out;
    std::vector<std::vector<CopySpan>> spans(lanes);
    for (const v1::TensorDesc& desc : header.tensors()) {
      DeviceLane& lane = *lanes_[desc.lane()];
      void* previous_stream = CurrentCudaStream();
      SetCurrentCudaStream(lane.stream());
      absl::StatusOr<Tensor> t = Tensor::TryEmpty(DescShape(desc), FromWireDType(desc.dtype()).value(),
                                                  Device::CUDA(lane.device()));
      SetCurrentCudaStream(previous_stream);
      if (!t.ok()) {
        SEAM_RETURN_IF_ERROR(Release(ds, deadline));
        return Annotate(t.status(), absl::StrCat("tensor '", desc.name(), "'"));
      }
      const char* base = static_cast<const char*>(peer_slots_[desc.lane()][ds.slot()]);
      spans[desc.lane()].push_back(CopySpan{base + desc.offset(), desc.byte_size() > 0 ? t->raw_data() : nullptr,
                                            desc.byte_size(), desc.offset() / 4});
      out.push_back(*std::move(t));
    }
    std::vector<device::CopyChecksumResult> sums(lanes, device::CopyChecksumResult{0, 0, 0});
    absl::Status copied = Copy(spans, ds.slot(), ds.checksum_seed(), deadline, sums);
    if (!copied.ok()) {
      // The kernels may still write into `out` (and read the slot): keep both, and the link, as they are.
      stranded_.push_back(std::move(out));
      broken_ = copied;
      return copied;
    }
    last_index_ = ds.index();
    SEAM_RETURN_IF_ERROR(Release(ds, deadline));
    last_checksums_.assign(lanes, 0);
    for (int l = 0; l < lanes; ++l) {
      if (spans[l].empty()) continue;
      if (sums[l].checksum != sums[l].expected) {
        return absl::DataLossError(absl::StrFormat("lane %d: device checksum 0x%016x != the producer's 0x%016x", l,
                                                   sums[l].checksum, sums[l].expected));
      }
      last_checksums_[l] = sums[l].checksum;
    }
    return out;
  }

  void Discard(const v1::StreamState& header, absl::Time deadline) override {
    if (!CheckLink(header).ok()) return;
    last_index_ = header.device_slot().index();
    Release(header.device_slot(), deadline).IgnoreError();
  }

 private:
  int slots() const { return peer_slots_.empty() ? 0 : static_cast<int>(peer_slots_[0].size()); }

  // The header is of the accepted link, for a slot use after the last one.
  absl::Status CheckLink(const v1::StreamState& header) const {
    const v1::DeviceSlot& ds = header.device_slot();
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("device link broke earlier: ", broken_.message()));
    }
    if (link_id_ == 0 || ds.link_id() != link_id_) {
      return absl::InvalidArgumentError(absl::StrFormat("device_slot.link_id: 0x%016x is not the accepted link",
                                                        ds.link_id()));
    }
    if (ds.slot() >= static_cast<uint32_t>(slots())) {
      return absl::InvalidArgumentError(absl::StrCat("device_slot.slot: ", ds.slot(), " of ", slots()));
    }
    if (ds.index() <= last_index_) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_slot.index: ", ds.index(), " after ", last_index_, " (a replay)"));
    }
    return absl::OkStatus();
  }

  // Copies each lane's spans out of `slot` once the producer's event fired,
  // reading the producer's checksum from the slot's trailer beside the sum.
  absl::Status Copy(const std::vector<std::vector<CopySpan>>& spans, uint32_t slot, uint64_t seed,
                    absl::Time deadline, std::vector<device::CopyChecksumResult>& sums) {
    for (size_t l = 0; l < lanes_.size(); ++l) {
      if (spans[l].empty()) continue;
      DeviceScope scope(lanes_[l]->device());
      SEAM_RETURN_IF_ERROR(scope.status());
      const char* trailer = static_cast<const char*>(peer_slots_[l][slot]) + slot_bytes_;
      SEAM_RETURN_IF_ERROR(lanes_[l]->Launch(spans[l].data(), static_cast<int>(spans[l].size()), seed,
                                             peer_events_[l][slot], nullptr,
                                             reinterpret_cast<const uint64_t*>(trailer)));
    }
    for (size_t l = 0; l < lanes_.size(); ++l) {
      if (spans[l].empty()) continue;
      SEAM_ASSIGN_OR_RETURN(sums[l], lanes_[l]->Wait(deadline));
    }
    return absl::OkStatus();
  }

  absl::Status Release(const v1::DeviceSlot& ds, absl::Time deadline) {
    v1::DeviceLinkReply reply;
    reply.set_link_id(link_id_);
    reply.set_epoch(options_.epoch);
    reply.mutable_release()->set_slot(ds.slot());
    reply.mutable_release()->set_index(ds.index());
    return SendDeviceLinkReply(worker_, endpoint_, reply, options_.key, deadline);
  }

  absl::Status Open(const v1::DeviceLinkOffer& offer) {
    const int slots = offer.lanes(0).slot_memory_size();
    for (int l = 0; l < offer.lanes_size(); ++l) {
      const v1::DeviceLane& wire = offer.lanes(l);
      DeviceScope scope(lanes_[l]->device());
      SEAM_RETURN_IF_ERROR(scope.status());
      const std::string ctx = absl::StrCat("lane ", l, " (GPU ", wire.pci_bus_id(), ")");
      std::vector<void*>& memory = peer_slots_.emplace_back();
      std::vector<void*>& events = peer_events_.emplace_back();
      for (int s = 0; s < slots; ++s) {
        cudaIpcMemHandle_t mh;
        cudaIpcEventHandle_t eh;
        if (wire.slot_memory(s).size() != sizeof(mh) || wire.slot_events(s).size() != sizeof(eh)) {
          return absl::InvalidArgumentError(absl::StrCat(ctx, ": slot ", s, "'s handles have the wrong size"));
        }
        std::memcpy(&mh, wire.slot_memory(s).data(), sizeof(mh));
        std::memcpy(&eh, wire.slot_events(s).data(), sizeof(eh));
        void* p = nullptr;
        SEAM_RETURN_IF_ERROR(
            Annotate(SEAM_CUDA_STATUS(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess)), ctx));
        memory.push_back(p);
        cudaEvent_t e = nullptr;
        SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaIpcOpenEventHandle(&e, eh)), ctx));
        events.push_back(e);
      }
    }
    link_id_ = offer.link_id();
    slot_bytes_ = offer.slot_bytes();
    last_index_ = 0;
    return absl::OkStatus();
  }

  void Close() {
    for (size_t l = 0; l < peer_slots_.size(); ++l) {
      DeviceScope scope(lanes_[l]->device());
      cudaStreamSynchronize(static_cast<cudaStream_t>(lanes_[l]->stream()));
      if (!stranded_.empty()) continue;  // a kernel may still read them
      for (void* p : peer_slots_[l]) cudaIpcCloseMemHandle(p);
      if (l < peer_events_.size()) {
        for (void* e : peer_events_[l]) cudaEventDestroy(static_cast<cudaEvent_t>(e));
      }
    }
    peer_slots_.clear();
    peer_events_.clear();
    link_id_ = 0;
  }

  UcxWorker& worker_;
  UcxEndpoint& endpoint_;
  DeviceLinkOptions options_;
  ConsumerFacts facts_;
  std::vector<std::unique_ptr<DeviceLane>> lanes_;
  std::map<uint64_t, TransportChoice> answered_;  // by link id
  uint64_t link_id_ = 0;                          // the accepted link (0: none)
  uint64_t slot_bytes_ = 0;
  uint64_t last_index_ = 0;
  std::vector<std::vector<void*>> peer_slots_;   // [lane][slot], opened IPC memory
  std::vector<std::vector<void*>> peer_events_;  // [lane][slot], opened IPC events
  absl::Status broken_;
  std::vector<uint64_t> last_checksums_;        // per lane, of the last handoff taken whole
  std::vector<std::vector<Tensor>> stranded_;  // outputs of copies that missed their deadline
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceHandoffReceiver>> DeviceHandoffReceiver::Create(UcxWorker& worker,
                                                                                     UcxEndpoint& to_sender,
                                                                                     DeviceLinkOptions options) {
  if (options.devices.empty()) return absl::InvalidArgumentError("device link receiver: no lanes");
  auto receiver = std::make_unique<DeviceHandoffReceiverImpl>(worker, to_sender, std::move(options));
  SEAM_RETURN_IF_ERROR(receiver->Init());
  return std::unique_ptr<DeviceHandoffReceiver>(std::move(receiver));
}

}  // namespace seam::handoff
