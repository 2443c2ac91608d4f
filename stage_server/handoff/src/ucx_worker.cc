// UcxWorker and UcxEndpoint lifetime: UCP context and worker creation with
// the chosen error-handling mode, worker address, connect, close, teardown.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "seam/core/status.h"
#include "src/ucx_check.h"
#include "src/ucx_internal.h"

namespace seam::handoff {
namespace {

// Progresses `worker` until `request` completes or `deadline` passes;
// returns the completion status, or UCS_INPROGRESS on timeout (request kept).
ucs_status_t ProgressUntil(ucp_worker_h worker, void* request, absl::Time deadline) {
  for (;;) {
    const ucs_status_t status = ucp_request_check_status(request);
    if (status != UCS_INPROGRESS) return status;
    if (absl::Now() >= deadline) return UCS_INPROGRESS;
    ucp_worker_progress(worker);
  }
}

std::string CaptureOutput(void (*print)(void*, FILE*), void* handle) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&buffer, &size);
  if (stream == nullptr) return "";
  print(handle, stream);
  std::fclose(stream);
  std::string text(buffer, size);
  std::free(buffer);
  return text;
}

}  // namespace

void UcxEndpointState::OnError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* state = static_cast<UcxEndpointState*>(arg);
  if (state->failure == UCS_OK) state->failure = status;
}

void ForceCloseEndpoint(UcxEndpointState& state, ucs_status_t reason) {
  if (state.failure == UCS_OK) state.failure = reason;
  if (state.ep == nullptr || state.worker == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t request = ucp_ep_close_nbx(state.ep, &param);
  state.ep = nullptr;
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  // A forced close completes locally. Should it not, releasing the request
  // is still safe (it owns no caller memory): UCX finishes it internally.
  ProgressUntil(state.worker, request, absl::Now() + state.cancel_grace);
  ucp_request_free(request);
}

UcxEndpoint& UcxEndpoint::operator=(UcxEndpoint&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) Close(absl::Now() + state_->close_timeout).IgnoreError();
    state_ = std::move(other.state_);
  }
  return *this;
}

UcxEndpoint::~UcxEndpoint() {
  if (state_ != nullptr) Close(absl::Now() + state_->close_timeout).IgnoreError();
}

absl::Status UcxEndpoint::health() const {
  if (state_ == nullptr) return absl::FailedPreconditionError("UCX endpoint was never connected");
  if (state_->failed()) {
    return absl::UnavailableError(absl::StrCat("UCX endpoint failed: ", ucs_status_string(state_->failure)));
  }
  if (state_->ep == nullptr) return absl::FailedPreconditionError("UCX endpoint is closed");
  return absl::OkStatus();
}

absl::Status UcxEndpoint::Close(absl::Time deadline) {
  if (state_ == nullptr || state_->ep == nullptr || state_->worker == nullptr) return absl::OkStatus();
  UcxEndpointState& state = *state_;
  if (state.failed()) {
    ForceCloseEndpoint(state, state.failure);
    return absl::OkStatus();
  }
  // Flush first: a flush that misses the deadline is completed (cancelled)
  // by the forced close below, which a pending graceful close could not be.
  ucp_request_param_t param{};
  ucs_status_ptr_t flush = ucp_ep_flush_nbx(state.ep, &param);
  if (UCS_PTR_IS_ERR(flush)) {
    ForceCloseEndpoint(state, UCS_PTR_STATUS(flush));
    return absl::OkStatus();
  }
  if (flush != nullptr) {
    const ucs_status_t status = ProgressUntil(state.worker, flush, deadline);
    if (status != UCS_OK) ForceCloseEndpoint(state, status == UCS_INPROGRESS ? UCS_ERR_TIMED_OUT : status);
    ucp_request_free(flush);  // safe in any state: a flush owns no caller memory
    if (status == UCS_INPROGRESS) {
      return absl::DeadlineExceededError("UCX endpoint flush missed its deadline; endpoint closed by force");
    }
    if (status != UCS_OK) return absl::OkStatus();
  }
  // In PEER mode a graceful close waits for the peer to take part; if it does
  // not by the deadline, the request is released and UCX finishes (or the
  // worker's destruction purges) it.
  ucs_status_ptr_t close = ucp_ep_close_nbx(state.ep, &param);
  state.ep = nullptr;
  if (close == nullptr || UCS_PTR_IS_ERR(close)) return absl::OkStatus();
  const ucs_status_t status = ProgressUntil(state.worker, close, deadline);
  ucp_request_free(close);
  if (status == UCS_INPROGRESS) {
    return absl::DeadlineExceededError("UCX endpoint close missed its deadline; left to the worker");
  }
  return absl::OkStatus();
}

std::string UcxEndpoint::DescribeTransports() const {
  if (state_ == nullptr || state_->ep == nullptr) return "";
  return CaptureOutput([](void* ep, FILE* f) { ucp_ep_print_info(static_cast<ucp_ep_h>(ep), f); }, state_->ep);
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const UcxWorkerOptions& options) {
  ucp_config_t* config = nullptr;
  SEAM_UCS_RETURN_IF_ERROR(ucp_config_read(nullptr, nullptr, &config));
  for (const auto& [name, value] : options.config) {
    const ucs_status_t status = ucp_config_modify(config, name.c_str(), value.c_str());
    if (status != UCS_OK) {
      ucp_config_release(config);
      return UcsStatus(status, absl::StrCat("ucp_config_modify(", name, "=", value, ")"), __FILE__, __LINE__);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 0;
  auto handles = std::make_unique<Handles>();
  const ucs_status_t init = ucp_init(&params, config, &handles->context);
  ucp_config_release(config);
  SEAM_UCS_RETURN_IF_ERROR(init);

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  const ucs_status_t created = ucp_worker_create(handles->context, &worker_params, &handles->worker);
  if (created != UCS_OK) {
    ucp_cleanup(handles->context);
    return SEAM_UCS_STATUS(created);
  }
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  const ucs_status_t got = ucp_worker_get_address(handles->worker, &address, &address_length);
  if (got != UCS_OK) {
    ucp_worker_destroy(handles->worker);
    ucp_cleanup(handles->context);
    return SEAM_UCS_STATUS(got);
  }
  std::string bytes(reinterpret_cast<const char*>(address), address_length);
  ucp_worker_release_address(handles->worker, address);
  return std::unique_ptr<UcxWorker>(new UcxWorker(options, std::move(handles), std::move(bytes)));
}

UcxWorker::UcxWorker(UcxWorkerOptions options, std::unique_ptr<Handles> handles, std::string address)
    : options_(std::move(options)), handles_(std::move(handles)), address_(std::move(address)) {}

UcxWorker::~UcxWorker() {
  for (const auto& weak : endpoints_) {
    if (std::shared_ptr<UcxEndpointState> state = weak.lock()) {
      ForceCloseEndpoint(*state, UCS_ERR_CANCELED);
      state->worker = nullptr;
    }
  }
  ucp_worker_destroy(handles_->worker);
  ucp_cleanup(handles_->context);
}

absl::StatusOr<UcxEndpoint> UcxWorker::Connect(absl::string_view peer_address) {
  if (peer_address.empty()) return absl::InvalidArgumentError("Connect: empty peer worker address");
  auto state = std::make_shared<UcxEndpointState>();
  state->worker = handles_->worker;
  state->mode = options_.error_mode;
  state->close_timeout = options_.close_timeout;
  state->cancel_grace = options_.cancel_grace;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  if (options_.error_mode == UcxErrorMode::kPeer) {
    params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxEndpointState::OnError;
    params.err_handler.arg = state.get();
  } else {
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  }
  SEAM_UCS_RETURN_IF_ERROR(ucp_ep_create(handles_->worker, &params, &state->ep));
  // Drop entries of endpoints already gone before remembering this one.
  endpoints_.erase(std::remove_if(endpoints_.begin(), endpoints_.end(),
                                  [](const std::weak_ptr<UcxEndpointState>& w) { return w.expired(); }),
                   endpoints_.end());
  endpoints_.push_back(state);
  UcxEndpoint endpoint;
  endpoint.state_ = std::move(state);
  return endpoint;
}

bool UcxWorker::Progress() { return ucp_worker_progress(handles_->worker) != 0; }

std::string UcxWorker::DescribeTransports() const {
  return CaptureOutput([](void* w, FILE* f) { ucp_worker_print_info(static_cast<ucp_worker_h>(w), f); },
                       handles_->worker);
}

}  // namespace seam::handoff
