// One request on a connection, from its head to the end of its answer, and
// libmicrohttpd's callbacks that drive it. The event loop reads the head
// (routing, the gate and the body bound are applied there), then the body;
// once the request is whole the connection is suspended and the handler
// runs on a worker; the worker resumes it with the answer. A streamed
// answer's bytes go through a bounded buffer: the worker writes, the event
// loop reads (suspending the connection while the buffer is empty). Held by
// shared_ptr: the connection (until completion), the worker and a streamed
// response each keep it alive. Internal to seam_http_server.
#pragma once

#include <microhttpd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "seam/http_server/http_message.h"
#include "seam/http_server/http_server.h"

namespace seam::http_server {

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(Server::Impl& server, MHD_Connection* connection) : server_(server), connection_(connection) {}

  // MHD callbacks (registered by the server), on an event loop.
  static MHD_Result OnAccess(void* server, MHD_Connection* connection, const char* url, const char* method,
                             const char* version, const char* upload_data, size_t* upload_data_size,
                             void** con_cls);
  static void OnCompleted(void* server, MHD_Connection* connection, void** con_cls,
                          MHD_RequestTerminationCode toe);
  static ssize_t OnRead(void* exchange, uint64_t pos, char* buf, size_t max);
  static void OnFreeRead(void* exchange);

  // The server stops: sinks report the client gone.
  void Abandon();
  // The server stops, its workers joined: a connection suspended for a
  // streamed answer is resumed, to be closed.
  void ResumeForStop();

 private:
  enum class Phase { kReceiving, kRefused, kRunning, kReady, kAnswered };

  MHD_Result Head(const std::string& url, const std::string& method);
  MHD_Result Body(const char* data, size_t* size);
  MHD_Result Whole();
  // On a worker: the handler, then (for a streamed answer) its provider.
  void Run();
  void Stream();
  // Queues `response` on the connection (its streamed form reads this exchange).
  MHD_Result Queue(Response& response);
  MHD_Result Refuse(int status, const std::string& message);
  // The sink of a streamed answer.
  bool Write(const char* data, size_t size);
  void Finish(bool complete);
  ssize_t Read(char* buf, size_t max);
  // Resumes the connection if it is suspended; under mu_.
  void ResumeLocked();

  Server::Impl& server_;
  MHD_Connection* const connection_;
  const Route* route_ = nullptr;
  Request request_;
  Response response_;
  Phase phase_ = Phase::kReceiving;  // event loop, and the worker under mu_
  bool too_large_ = false;           // the body passed the bound (event loop only)
  size_t discarded_ = 0;             // its bytes read past the bound, kept nowhere

  std::mutex mu_;
  std::condition_variable taken_;  // the reader took bytes, or the client went
  bool suspended_ = false;
  bool gone_ = false;              // completed, or the server stops: nothing more reaches the client
  std::string pending_;            // streamed bytes not yet taken
  size_t pending_at_ = 0;          // how far the reader took them
  size_t offset_taken_ = 0;        // streamed bytes the reader took in all
  bool finished_ = false;          // the streamed answer ended
  bool complete_ = false;          // ... with sink.done()
};

}  // namespace seam::http_server
