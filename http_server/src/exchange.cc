// An exchange's life (exchange.h): head, body, handler, answer.
#include "exchange.h"

#include <malloc.h>
#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server_impl.h"

namespace seam::http_server {
namespace {

unsigned Seconds(absl::Duration d) { return static_cast<unsigned>(std::max<int64_t>(1, absl::ToInt64Seconds(d))); }

std::string ClientAddress(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "";
  char text[INET6_ADDRSTRLEN] = {};
  const sockaddr* a = info->client_addr;
  if (a->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, text, sizeof(text));
  } else if (a->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, text, sizeof(text));
  }
  return text;
}

// With a client CA: the client presented a certificate that verifies under it.
bool ClientCertificateVerified(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned int certificates = 0;
  if (gnutls_certificate_get_peers(session, &certificates) == nullptr || certificates == 0) return false;
  unsigned int status = 0;
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS && status == 0;
}

MHD_Result AddHeader(void* request, MHD_ValueKind, const char* key, const char* value) {
  static_cast<Request*>(request)->headers.emplace_back(key, value == nullptr ? "" : value);
  return MHD_YES;
}

}  // namespace

MHD_Result Exchange::OnAccess(void* server, MHD_Connection* connection, const char* url, const char* method,
                              const char*, const char* upload_data, size_t* upload_data_size, void** con_cls) {
  Server::Impl& impl = *static_cast<Server::Impl*>(server);
  auto* held = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (held == nullptr) {
    auto exchange = std::make_shared<Exchange>(impl, connection);
    {
      std::lock_guard<std::mutex> lock(impl.mu);
      impl.live.insert(exchange);
    }
    *con_cls = new std::shared_ptr<Exchange>(exchange);
    return exchange->Head(url == nullptr ? "" : url, method == nullptr ? "" : method);
  }
  if (*upload_data_size > 0) return (*held)->Body(upload_data, upload_data_size);
  return (*held)->Whole();
}

void Exchange::OnCompleted(void* server, MHD_Connection* connection, void** con_cls, MHD_RequestTerminationCode) {
  auto* held = static_cast<std::shared_ptr<Exchange>*>(*con_cls);
  if (held == nullptr) return;
  Server::Impl& impl = *static_cast<Server::Impl*>(server);
  {
    std::lock_guard<std::mutex> lock((*held)->mu_);
    (*held)->gone_ = true;
    (*held)->taken_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.live.erase(*held);
  }
  delete held;
  *con_cls = nullptr;
  // Kept alive: waiting for the next head, the connection may idle as long as a new one.
  MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, Seconds(impl.options.head_timeout));
}

MHD_Result Exchange::Head(const std::string& url, const std::string& method) {
  server_.heads->HeadSeen(connection_);
  MHD_set_connection_option(connection_, MHD_CONNECTION_OPTION_TIMEOUT, Seconds(server_.options.transfer_timeout));
  request_.method = method;
  request_.path = url;
  request_.remote_address = ClientAddress(connection_);
  MHD_get_connection_values(connection_, MHD_HEADER_KIND, &AddHeader, &request_);
  if (server_.stopping) return Refuse(503, "the server is shutting down");
  bool path_known = false;
  route_ = server_.Find(method, url, &path_known);
  if (route_ == nullptr) {
    return path_known ? Refuse(405, absl::StrCat("method ", method, " is not allowed on ", url))
                      : Refuse(404, absl::StrCat("no route ", method, " ", url));
  }
  if (!server_.options.tls_client_ca_file.empty() && !ClientCertificateVerified(connection_)) {
    return Refuse(403, "this server needs a client certificate signed by its client CA");
  }
  if (server_.options.gate) {
    Response refusal;
    if (!server_.options.gate(request_, refusal)) {
      phase_ = Phase::kRefused;
      return Queue(refusal);
    }
  }
  const size_t max = server_.options.max_body_bytes;
  if (const char* length = MHD_lookup_connection_value(connection_, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
    uint64_t declared = 0;
    if (absl::SimpleAtoi(length, &declared) && declared > max) {
      return Refuse(413, absl::StrCat("the request body is larger than ", max, " bytes"));
    }
  }
  return MHD_YES;
}

MHD_Result Exchange::Body(const char* data, size_t* size) {
  const size_t n = *size;
  *size = 0;
  if (phase_ != Phase::kReceiving) return MHD_YES;  // refused: the rest is discarded
  const size_t max = server_.options.max_body_bytes;
  if (!too_large_ && request_.body.size() + n <= max) {
    request_.body.append(data, n);
    return MHD_YES;
  }
  if (!too_large_) {  // the bound is passed: nothing of the body is kept from here on
    too_large_ = true;
    discarded_ = request_.body.size();
    std::string().swap(request_.body);
  }
  discarded_ += n;
  // Past four times the bound the client is not waiting for an answer: cut it off.
  return discarded_ > 4 * max ? MHD_NO : MHD_YES;
}

MHD_Result Exchange::Whole() {
  Phase phase;
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase = phase_;
  }
  if (phase == Phase::kReady) {
    phase_ = Phase::kAnswered;
    return Queue(response_);
  }
  if (phase != Phase::kReceiving) return MHD_YES;
  if (too_large_) {
    return Refuse(413, absl::StrCat("the request body is larger than ", server_.options.max_body_bytes, " bytes"));
  }
  if (server_.stopping) return Refuse(503, "the server is shutting down");
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = Phase::kRunning;
    suspended_ = true;
    MHD_suspend_connection(connection_);
  }
  server_.workers->Post([self = shared_from_this()] { self->Run(); });
  return MHD_YES;
}

// Bodies from this size on are followed by a malloc_trim (glibc) once handled.
constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;

void Exchange::Run() {
  try {
    route_->handler(request_, response_);
  } catch (const std::exception& e) {
    response_ = server_.ErrorAnswer(500, e.what());
  } catch (...) {
    response_ = server_.ErrorAnswer(500, "the handler failed");
  }
  const bool large = request_.body.size() >= kTrimAfterBodyBytes;
  std::string().swap(request_.body);  // a large body's memory goes back before the answer
  // What a large body and its parse took stays in this worker's malloc arena
  // unless it is handed back: trimmed, the process returns to its idle size.
  if (large) malloc_trim(0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    phase_ = Phase::kReady;
    ResumeLocked();
  }
  if (response_.provider) Stream();
}

void Exchange::Stream() {
  DataSink sink;
  sink.write = [this](const char* data, size_t size) { return Write(data, size); };
  sink.done = [this] { Finish(true); };
  sink.is_writable = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return !gone_;
  };
  size_t offset = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || gone_) break;
      offset = pending_.size() - pending_at_ + offset_taken_;
    }
    if (!response_.provider(offset, sink)) break;
  }
  bool success = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    success = complete_ && !gone_;
  }
  Finish(false);  // a provider that gave up cuts the answer off
  if (response_.releaser) response_.releaser(success);
}

bool Exchange::Write(const char* data, size_t size) {
  std::unique_lock<std::mutex> lock(mu_);
  taken_.wait(lock, [&] { return gone_ || pending_.size() - pending_at_ < server_.options.max_stream_buffer_bytes; });
  if (gone_ || finished_) return false;
  if (pending_at_ == pending_.size()) {
    pending_.clear();
    pending_at_ = 0;
  }
  pending_.append(data, size);
  ResumeLocked();
  return true;
}

void Exchange::Finish(bool complete) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  complete_ = complete;
  ResumeLocked();
}

ssize_t Exchange::OnRead(void* exchange, uint64_t, char* buf, size_t max) {
  return (*static_cast<std::shared_ptr<Exchange>*>(exchange))->Read(buf, max);
}

void Exchange::OnFreeRead(void* exchange) { delete static_cast<std::shared_ptr<Exchange>*>(exchange); }

ssize_t Exchange::Read(char* buf, size_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  if (gone_) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (pending_at_ < pending_.size()) {
    const size_t n = std::min(max, pending_.size() - pending_at_);
    std::memcpy(buf, pending_.data() + pending_at_, n);
    pending_at_ += n;
    offset_taken_ += n;
    taken_.notify_all();
    return static_cast<ssize_t>(n);
  }
  if (finished_) return complete_ ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
  // Nothing yet: the connection waits, off the event loop, until the worker writes.
  suspended_ = true;
  MHD_suspend_connection(connection_);
  return 0;
}

void Exchange::ResumeLocked() {
  if (!suspended_) return;
  suspended_ = false;
  MHD_resume_connection(connection_);
}

void Exchange::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  gone_ = true;
  taken_.notify_all();
}

void Exchange::ResumeForStop() {
  std::lock_guard<std::mutex> lock(mu_);
  ResumeLocked();
}

MHD_Result Exchange::Refuse(int status, const std::string& message) {
  phase_ = Phase::kRefused;
  Response answer = server_.ErrorAnswer(status, message);
  return Queue(answer);
}

MHD_Result Exchange::Queue(Response& response) {
  MHD_Response* m = nullptr;
  if (response.provider) {
    m = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, &OnRead,
                                          new std::shared_ptr<Exchange>(shared_from_this()), &OnFreeRead);
  } else {
    m = MHD_create_response_from_buffer(response.body.size(), response.body.data(), MHD_RESPMEM_MUST_COPY);
  }
  if (m == nullptr) return MHD_NO;
  for (const auto& [name, value] : response.headers) MHD_add_response_header(m, name.c_str(), value.c_str());
  if (!response.content_type.empty()) {
    MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, response.content_type.c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection_, static_cast<unsigned>(response.status), m);
  MHD_destroy_response(m);
  return queued;
}

}  // namespace seam::http_server
