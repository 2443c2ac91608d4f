// DeviceHandoffSender over CUDA IPC (see device_handoff.h): the rings, the
// offer, slot reuse by the consumer's releases, and one handoff per Send.
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "seam/core/cuda_check.h"
#include "seam/core/status.h"
#include "seam/handoff/device_handoff.h"
#include "seam/handoff/handoff_tag.h"
#include "src/device_checksum_math.h"
#include "src/device_lane.h"
#include "src/device_link_reply.h"
#include "src/device_placement.h"
#include "src/handoff_header.h"
#include "src/tensor_desc.h"

namespace seam::handoff {
namespace {

using device::CopySpan;
using device::DeviceLane;
using device::DeviceScope;

// A 64-bit value from SplitMix64's mixer (seeds of successive handoffs).
uint64_t Mix(uint64_t x) { return checksum::Key(x, 0) ^ (x * checksum::kGolden); }

class DeviceHandoffSenderImpl final : public DeviceHandoffSender {
 public:
  DeviceHandoffSenderImpl(UcxWorker& worker, UcxEndpoint& endpoint, DeviceLinkOptions options)
      : worker_(worker), endpoint_(endpoint), options_(std::move(options)) {}

  ~DeviceHandoffSenderImpl() override {
    for (Lane& lane : lanes_) {
      if (lane.engine == nullptr) continue;
      DeviceScope scope(lane.engine->device());
      cudaStreamSynchronize(static_cast<cudaStream_t>(lane.engine->stream()));
      for (cudaEvent_t e : lane.events) cudaEventDestroy(e);
      for (void* p : lane.slots) cudaFree(p);
    }
  }

  absl::Status Init() {
    const size_t slots = static_cast<size_t>(options_.slots);
    std::random_device random;
    offer_.set_link_id((uint64_t{random()} << 32) ^ random());
    seed_base_ = (uint64_t{random()} << 32) ^ random();
    offer_.set_host_id(LocalHostId());
    offer_.set_pid(static_cast<int64_t>(getpid()));
    offer_.set_slot_bytes(options_.slot_bytes);
    SEAM_ASSIGN_OR_RETURN(reply_key_, ReplyKey(options_.key));
    SEAM_ASSIGN_OR_RETURN(link_, LinkTagOf(options_.key));
    outstanding_.assign(slots, 0);
    held_.assign(slots, {});
    for (int device : options_.devices) {
      const std::string ctx = absl::StrCat("device link lane on GPU ", device);
      Lane& lane = lanes_.emplace_back();
      SEAM_ASSIGN_OR_RETURN(lane.engine, DeviceLane::Create(device));
      DeviceScope scope(device);
      SEAM_RETURN_IF_ERROR(scope.status());
      v1::DeviceLane* wire = offer_.add_lanes();
      char bus[32] = {};
      SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaDeviceGetPCIBusId(bus, sizeof(bus), device)), ctx));
      wire->set_pci_bus_id(bus);
      for (size_t s = 0; s < slots; ++s) {
        void* p = nullptr;
        SEAM_RETURN_IF_ERROR(
            Annotate(SEAM_CUDA_STATUS(cudaMalloc(&p, options_.slot_bytes + kSlotTrailerBytes)), ctx));
        lane.slots.push_back(p);
        cudaEvent_t e = nullptr;
        SEAM_RETURN_IF_ERROR(Annotate(
            SEAM_CUDA_STATUS(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming)), ctx));
        lane.events.push_back(e);
        cudaIpcMemHandle_t memory;
        cudaIpcEventHandle_t event;
        SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaIpcGetMemHandle(&memory, p)), ctx));
        SEAM_RETURN_IF_ERROR(Annotate(SEAM_CUDA_STATUS(cudaIpcGetEventHandle(&event, e)), ctx));
        wire->add_slot_memory(std::string(reinterpret_cast<const char*>(&memory), sizeof(memory)));
        wire->add_slot_events(std::string(reinterpret_cast<const char*>(&event), sizeof(event)));
      }
    }
    return absl::OkStatus();
  }

  const v1::DeviceLinkOffer& offer() const override { return offer_; }
  Answer answer() const override { return answer_; }
  const std::string& answer_reason() const override { return reason_; }
  DeviceLinkDrops drops() const override { return drops_; }

  void Poll() override {
    worker_.Progress();
    for (;;) {
      absl::StatusOr<std::vector<char>> bytes = worker_.RecvUnknownSize(DeviceReplyTag(link_), kTagKindAndLinkMask,
                                                                        kMaxReplyBytes, absl::InfinitePast());
      if (absl::IsOutOfRange(bytes.status())) {
        ++drops_.malformed;
        continue;
      }
      if (!bytes.ok()) return;  // nothing waiting
      TakeReply(*bytes);
    }
  }

  absl::Status Fits(const std::vector<std::pair<std::string, Tensor>>& tensors) const override {
    return PlaceInSlots(tensors, options_.devices, options_.slot_bytes).status();
  }

  absl::Status Send(const v1::StreamState& header, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    absl::Time deadline) override {
    const std::string where = absl::StrCat("device handoff of microbatch ", header.microbatch_id());
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": the link broke earlier: ", broken_.message()));
    }
    if (answer_ != Answer::kAccepted) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": the consumer has not accepted the link"));
    }
    if (header.tensors_size() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": header already lists tensors; the sender fills them"));
    }
    SEAM_ASSIGN_OR_RETURN(const std::vector<Placement> placed,
                          PlaceInSlots(tensors, options_.devices, options_.slot_bytes));
    const uint64_t index = next_index_;
    const int slot = static_cast<int>((index - 1) % outstanding_.size());
    SEAM_RETURN_IF_ERROR(Annotate(WaitForRelease(slot, deadline), where));
    // A fault of an earlier copy, which nobody waited for, breaks the link here.
    for (Lane& lane : lanes_) {
      if (absl::Status e = lane.engine->StreamError(); !e.ok()) return Broken(Annotate(e, where));
    }
    SEAM_RETURN_IF_ERROR(Annotate(LetGoOf(slot, deadline), where));
    const uint64_t seed = Mix(seed_base_ + index);
    ++next_index_;
    // From the first launch on, a failure leaves the slot in an unknown state.
    const absl::Status copying = CopyIntoSlot(tensors, placed, slot, seed, index == 1);
    if (!copying.ok()) return Broken(Annotate(copying, where));
    // The copy reads `tensors` after Send returns: their memory stays
    // referenced until the slot's next use, when the copy is known done.
    for (const auto& [name, t] : tensors) held_[slot].push_back(t);

    v1::StreamState full = header;
    full.set_transport(v1::HANDOFF_TRANSPORT_CUDA_IPC);
    full.clear_device_offer();
    v1::DeviceSlot* ds = full.mutable_device_slot();
    ds->set_link_id(offer_.link_id());
    ds->set_slot(static_cast<uint32_t>(slot));
    ds->set_index(index);
    ds->set_checksum_seed(seed);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i].second;
      v1::TensorDesc* d = full.add_tensors();
      d->set_name(tensors[i].first);
      d->set_dtype(ToWireDType(t.dtype()));
      for (int64_t dim : t.shape()) d->add_shape(dim);
      d->set_byte_size(t.nbytes());
      d->set_lane(static_cast<uint32_t>(placed[i].lane));
      d->set_offset(placed[i].offset);
    }
    absl::StatusOr<std::string> bytes = SealHeader(full, options_.key);
    if (!bytes.ok()) return Broken(Annotate(bytes.status(), where));
    const absl::Status sent =
        worker_.Send(endpoint_, HeaderTag(link_), bytes->data(), bytes->size(), deadline);
    if (!sent.ok()) return Broken(Annotate(sent, absl::StrCat(where, ": header")));
    outstanding_[slot] = index;
    return absl::OkStatus();
  }

 private:
  struct Lane {
    std::unique_ptr<DeviceLane> engine;
    std::vector<void*> slots;
    std::vector<cudaEvent_t> events;
  };

  absl::Status Broken(absl::Status why) {
    broken_ = why;
    return why;
  }

  void TakeReply(const std::vector<char>& bytes) {
    absl::StatusOr<v1::DeviceLinkReply> reply = CheckReply(absl::string_view(bytes.data(), bytes.size()), reply_key_);
    if (!reply.ok()) {
      ++(absl::IsPermissionDenied(reply.status()) ? drops_.bad_mac : drops_.malformed);
      return;
    }
    if (reply->link_id() != offer_.link_id() || reply->epoch() != options_.epoch) {
      ++drops_.stale;
      return;
    }
    if (reply->has_answer()) {
      if (answer_ != Answer::kPending) {
        ++drops_.stale;
        return;
      }
      answer_ = reply->answer().accepted() ? Answer::kAccepted : Answer::kDeclined;
      reason_ = reply->answer().reason();
      return;
    }
    const v1::DeviceSlotRelease& release = reply->release();
    if (release.slot() >= outstanding_.size() || release.index() == 0 ||
        outstanding_[release.slot()] != release.index()) {
      ++drops_.stale;
      return;
    }
    outstanding_[release.slot()] = 0;
  }

  // Waits until the consumer released `slot`'s previous use.
  absl::Status WaitForRelease(int slot, absl::Time deadline) {
    Poll();
    while (outstanding_[slot] != 0) {
      absl::StatusOr<std::vector<char>> bytes =
          worker_.RecvUnknownSize(DeviceReplyTag(link_), kTagKindAndLinkMask, kMaxReplyBytes, deadline, &endpoint_);
      if (absl::IsOutOfRange(bytes.status())) {
        ++drops_.malformed;
        continue;
      }
      if (!bytes.ok()) {
        return Annotate(bytes.status(), absl::StrCat("waiting for the release of slot ", slot, " (handoff ",
                                                     outstanding_[slot], ")"));
      }
      TakeReply(*bytes);
    }
    return absl::OkStatus();
  }

  // Lets go of the tensors `slot`'s previous use copied, once that copy is
  // done: at once after a release (the consumer's copy followed it), within
  // the deadline after a discard (the consumer never waited for it).
  absl::Status LetGoOf(int slot, absl::Time deadline) {
    if (held_[slot].empty()) return absl::OkStatus();
    for (Lane& lane : lanes_) {
      DeviceScope scope(lane.engine->device());
      SEAM_RETURN_IF_ERROR(scope.status());
      for (;;) {
        const cudaError_t e = cudaEventQuery(lane.events[slot]);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) return Broken(Annotate(SEAM_CUDA_STATUS(e), "the slot's previous copy"));
        if (absl::Now() >= deadline) {
          return absl::DeadlineExceededError(absl::StrCat("slot ", slot, "'s previous copy did not finish"));
        }
      }
    }
    held_[slot].clear();
    return absl::OkStatus();
  }

  // Enqueues, on each lane's stream, the copy of its tensors into `slot`,
  // with their checksum stored in the slot's trailer, then records the
  // slot's event (`first`: the link's first handoff, which the test hook
  // may corrupt). Nothing waits: the consumer's kernel waits for the event.
  absl::Status CopyIntoSlot(const std::vector<std::pair<std::string, Tensor>>& tensors,
                            const std::vector<Placement>& placed, int slot, uint64_t seed, bool first) {
    std::vector<std::vector<CopySpan>> spans(lanes_.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i].second;
      const Placement& p = placed[i];
      char* base = static_cast<char*>(lanes_[p.lane].slots[slot]);
      spans[p.lane].push_back(CopySpan{t.nbytes() > 0 ? t.raw_data() : nullptr, base + p.offset, t.nbytes(),
                                       p.offset / 4});
    }
    for (size_t l = 0; l < lanes_.size(); ++l) {
      if (spans[l].empty()) continue;
      Lane& lane = lanes_[l];
      DeviceScope scope(lane.engine->device());
      SEAM_RETURN_IF_ERROR(scope.status());
      char* base = static_cast<char*>(lane.slots[slot]);
      SEAM_RETURN_IF_ERROR(lane.engine->Launch(spans[l].data(), static_cast<int>(spans[l].size()), seed, nullptr,
                                               reinterpret_cast<uint64_t*>(base + options_.slot_bytes)));
      if (l == 0 && first && options_.flip_byte_after_checksum >= 0 &&
          static_cast<uint64_t>(options_.flip_byte_after_checksum) < options_.slot_bytes) {
        SEAM_RETURN_IF_ERROR(
            device::LaunchFlipByte(base + options_.flip_byte_after_checksum, lane.engine->stream()));
      }
      SEAM_CUDA_RETURN_IF_ERROR(
          cudaEventRecord(lane.events[slot], static_cast<cudaStream_t>(lane.engine->stream())));
    }
    return absl::OkStatus();
  }

  UcxWorker& worker_;
  UcxEndpoint& endpoint_;
  DeviceLinkOptions options_;
  std::string reply_key_;
  uint64_t link_ = 0;  // the epoch's link tag (handoff_tag.h)
  std::vector<Lane> lanes_;
  v1::DeviceLinkOffer offer_;
  Answer answer_ = Answer::kPending;
  std::string reason_;
  std::vector<uint64_t> outstanding_;  // per slot: the handoff index using it, 0 when free
  std::vector<std::vector<Tensor>> held_;  // per slot: the tensors its last copy read
  uint64_t next_index_ = 1;
  uint64_t seed_base_ = 0;
  absl::Status broken_;
  DeviceLinkDrops drops_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceHandoffSender>> DeviceHandoffSender::Create(UcxWorker& worker,
                                                                                 UcxEndpoint& to_receiver,
                                                                                 DeviceLinkOptions options) {
  if (options.devices.empty() || options.slots < 2 || options.slot_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("device link: ", options.devices.size(), " lanes, ",
                                                   options.slots, " slots of ", options.slot_bytes,
                                                   " bytes (needs a lane, 2 slots, and bytes)"));
  }
  auto sender = std::make_unique<DeviceHandoffSenderImpl>(worker, to_receiver, std::move(options));
  SEAM_RETURN_IF_ERROR(sender->Init());
  return std::unique_ptr<DeviceHandoffSender>(std::move(sender));
}

}  // namespace seam::handoff
