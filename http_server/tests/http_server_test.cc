// The HTTP listener over real sockets on loopback: routes, the gate before
// the body, body bounds for every transfer encoding, idle and slow clients,
// the head deadline, per-address limits, streamed answers, TLS (with and
// without client certificates), exclusive binding and many clients at once.
#include "seam/http_server/http_server.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "seam/security/certificates.h"
#include "seam/testing/http_client.h"
#include "seam/testing/temp_dir.h"

namespace seam::http_server {
namespace {

using ::testing::HasSubstr;
using seam::testing::HttpAnswer;
using seam::testing::HttpCall;
using seam::testing::HttpClientOptions;
using seam::testing::HttpConnection;
using seam::testing::HttpRequestBytes;

ServerOptions Options() {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.name = "--test-listen";
  o.max_body_bytes = 1 << 20;
  o.workers = 2;
  o.io_threads = 1;
  o.error_answer = [](const std::string& message, Response& r) { r.set_content("error: " + message, "text/plain"); };
  return o;
}

std::vector<Route> EchoRoutes(std::atomic<int>* posts = nullptr) {
  return {
      {"GET", "/hello", [](const Request&, Response& r) { r.set_content("hello", "text/plain"); }},
      {"POST", "/echo",
       [posts](const Request& q, Response& r) {
         if (posts != nullptr) ++*posts;
         r.set_content(absl::StrCat(q.body.size(), ":", q.get_header_value("x-tag")), "text/plain");
       }},
  };
}

std::unique_ptr<Server> Start(ServerOptions o, std::vector<Route> routes) {
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(std::move(o), std::move(routes));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// A chunked POST of `total` bytes in chunks of `chunk`.
std::string ChunkedPost(size_t total, size_t chunk) {
  std::string out = "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string piece(chunk, '[');
  for (size_t sent = 0; sent < total; sent += chunk) absl::StrAppend(&out, absl::Hex(chunk), "\r\n", piece, "\r\n");
  return out + "0\r\n\r\n";
}

TEST(HttpServer, RoutesAnswerAndAnUnknownPathIs404ThroughTheErrorAnswer) {
  auto s = Start(Options(), EchoRoutes());
  ASSERT_NE(s, nullptr);
  absl::StatusOr<HttpAnswer> hello = HttpCall(s->port(), "GET", "/hello", {}, "");
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->status, 200);
  EXPECT_EQ(hello->body, "hello");
  absl::StatusOr<HttpAnswer> none = HttpCall(s->port(), "GET", "/nope", {}, "");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->status, 404);
  EXPECT_EQ(none->body, "error: no route GET /nope");
  absl::StatusOr<HttpAnswer> method = HttpCall(s->port(), "GET", "/echo", {}, "");
  ASSERT_TRUE(method.ok()) << method.status();
  EXPECT_EQ(method->status, 405);
}

TEST(HttpServer, TheGateRefusesOnTheHeadBeforeAnyBodyByteIsRead) {
  ServerOptions o = Options();
  o.gate = [](const Request& head, Response& refusal) {
    if (head.get_header_value("Authorization") == "Bearer t") return true;
    refusal.status = 401;
    refusal.set_content("no token", "text/plain");
    return false;
  };
  std::atomic<int> posts{0};
  auto s = Start(o, EchoRoutes(&posts));
  ASSERT_NE(s, nullptr);
  auto c = HttpConnection::Open(s->port());
  ASSERT_TRUE(c.ok()) << c.status();
  // The head announces 512 KiB; not one body byte is sent, and the refusal comes.
  ASSERT_TRUE((*c)->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 524288\r\n\r\n").ok());
  absl::StatusOr<HttpAnswer> answer = (*c)->Read(absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 401);
  EXPECT_EQ(answer->body, "no token");
  absl::StatusOr<HttpAnswer> with = HttpCall(s->port(), "POST", "/echo", {{"Authorization", "Bearer t"}}, "abc");
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->body, "3:");
  EXPECT_EQ(posts.load(), 1);
}

TEST(HttpServer, ADeclaredBodyOverTheBoundIs413BeforeItIsSent) {
  auto s = Start(Options(), EchoRoutes());
  ASSERT_NE(s, nullptr);
  auto c = HttpConnection::Open(s->port());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n").ok());
  absl::StatusOr<HttpAnswer> answer = (*c)->Read(absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 413);
  EXPECT_EQ(answer->body, "error: the request body is larger than 1048576 bytes");
}

TEST(HttpServer, AChunkedBodyOverTheBoundIs413AndNeverReachesTheHandler) {
  std::atomic<int> posts{0};
  auto s = Start(Options(), EchoRoutes(&posts));
  ASSERT_NE(s, nullptr);
  auto c = HttpConnection::Open(s->port());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Send(ChunkedPost(3 << 20, 64 << 10)).ok());  // 3 MiB against a 1 MiB bound
  absl::StatusOr<HttpAnswer> answer = (*c)->Read(absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 413);
  EXPECT_EQ(posts.load(), 0);
  // Within the bound, chunked is an ordinary body.
  auto d = HttpConnection::Open(s->port());
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE((*d)->Send(ChunkedPost(512 << 10, 64 << 10)).ok());
  answer = (*d)->Read(absl::Seconds(10));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "524288:");
}

TEST(HttpServer, AChunkedBodyFarPastTheBoundIsCutOff) {
  auto s = Start(Options(), EchoRoutes());
  ASSERT_NE(s, nullptr);
  auto c = HttpConnection::Open(s->port());
  ASSERT_TRUE(c.ok()) << c.status();
  // Past four times the bound the server stops reading: the send fails or the connection closes.
  const absl::Status sent = (*c)->Send(ChunkedPost(16 << 20, 64 << 10));
  EXPECT_TRUE(!sent.ok() || (*c)->ClosedWithin(absl::Seconds(10)));
}

TEST(HttpServer, IdleConnectionsHoldNoWorker) {
  ServerOptions o = Options();
  o.head_timeout = absl::Seconds(60);  // the idle ones stay for the whole test
  auto s = Start(o, EchoRoutes());
  ASSERT_NE(s, nullptr);
  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 40; ++i) {
    auto c = HttpConnection::OpenIdle(s->port());
    ASSERT_TRUE(c.ok()) << c.status();
    idle.push_back(std::move(*c));
  }
  for (int i = 0; i < 8; ++i) {  // two workers, forty idle clients: every request is still served
    absl::StatusOr<HttpAnswer> answer = HttpCall(s->port(), "POST", "/echo", {}, "x", {}, absl::Seconds(10));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200);
  }
}

TEST(HttpServer, AHeadLateForItsDeadlineIsCutEvenWhenItTrickles) {
  ServerOptions o = Options();
  o.head_timeout = absl::Seconds(1);
  auto s = Start(o, EchoRoutes());
  ASSERT_NE(s, nullptr);
  auto idle = HttpConnection::OpenIdle(s->port());
  ASSERT_TRUE(idle.ok()) << idle.status();
  auto slow = HttpConnection::OpenIdle(s->port());
  ASSERT_TRUE(slow.ok()) << slow.status();
  const std::string head = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  bool cut = false;
  // One byte every 100 ms: never idle for long, never whole before the deadline.
  for (size_t i = 0; i < 30 && !cut; ++i) {
    if (!(*slow)->Send(head.substr(i, 1)).ok()) cut = true;
    if (!cut && (*slow)->ClosedWithin(absl::Milliseconds(100))) cut = true;
  }
  EXPECT_TRUE(cut) << "a trickling head outlived its 1 s deadline by 2 s";
  EXPECT_TRUE((*idle)->ClosedWithin(absl::Seconds(10)));
}

TEST(HttpServer, ConnectionsOverThePerAddressLimitAreClosed) {
  ServerOptions o = Options();
  o.max_connections_per_address = 4;
  o.head_timeout = absl::Seconds(60);
  auto s = Start(o, EchoRoutes());
  ASSERT_NE(s, nullptr);
  std::vector<std::unique_ptr<HttpConnection>> held;
  for (int i = 0; i < 4; ++i) {
    auto c = HttpConnection::OpenIdle(s->port());
    ASSERT_TRUE(c.ok()) << c.status();
    held.push_back(std::move(*c));
  }
  auto fifth = HttpConnection::OpenIdle(s->port());
  ASSERT_TRUE(fifth.ok()) << fifth.status();
  EXPECT_TRUE((*fifth)->ClosedWithin(absl::Seconds(10)));
  held.clear();  // the address's slots come back
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    absl::StatusOr<HttpAnswer> answer = HttpCall(s->port(), "GET", "/hello", {}, "");
    served = answer.ok() && answer->status == 200;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served);
}

TEST(HttpServer, AStreamedAnswerArrivesChunkByChunk) {
  std::vector<Route> routes = {{"GET", "/stream", [](const Request&, Response& r) {
                                  auto step = std::make_shared<int>(0);
                                  r.set_chunked_content_provider("text/event-stream", [step](size_t, DataSink& sink) {
                                    if (*step == 3) {
                                      sink.done();
                                      return true;
                                    }
                                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                    const std::string event = absl::StrCat("data: ", (*step)++, "\n\n");
                                    return sink.write(event.data(), event.size());
                                  });
                                }}};
  auto s = Start(Options(), routes);
  ASSERT_NE(s, nullptr);
  absl::StatusOr<HttpAnswer> answer = HttpCall(s->port(), "GET", "/stream", {}, "");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->headers["transfer-encoding"], "chunked");
  EXPECT_EQ(answer->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST(HttpServer, AClientGoneMidStreamEndsTheProviderAndStopDoesNotWaitForIt) {
  std::atomic<int> releases{0};
  std::atomic<bool> success{true};
  std::vector<Route> routes = {{"GET", "/forever", [&](const Request&, Response& r) {
                                  r.set_chunked_content_provider(
                                      "text/event-stream",
                                      [](size_t, DataSink& sink) {
                                        std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                        return sink.write("data: x\n\n", 9);
                                      },
                                      [&](bool ok) {
                                        success = ok;
                                        ++releases;
                                      });
                                }}};
  auto s = Start(Options(), routes);
  ASSERT_NE(s, nullptr);
  {
    auto c = HttpConnection::Open(s->port());
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Send(HttpRequestBytes("GET", "/forever", {}, "")).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // the client goes
  for (int i = 0; i < 400 && releases.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(releases.load(), 1) << "the stream of a client gone was not released within 20 s";
  EXPECT_FALSE(success.load());
  auto c = HttpConnection::Open(s->port());  // a stream still running when the server stops
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Send(HttpRequestBytes("GET", "/forever", {}, "")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s->Stop();
  EXPECT_TRUE((*c)->ClosedWithin(absl::Seconds(10)));
  EXPECT_EQ(releases.load(), 2);
}

TEST(HttpServer, TwoHundredClientsAtOnceAreAllServed) {
  ServerOptions o = Options();
  o.workers = 8;
  std::vector<Route> routes = {{"GET", "/slow", [](const Request&, Response& r) {
                                  std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                  r.set_content("ok", "text/plain");
                                }}};
  auto s = Start(o, routes);
  ASSERT_NE(s, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::string> failures(200);
  std::vector<std::thread> clients;
  for (int i = 0; i < 200; ++i) {
    clients.emplace_back([&, i] {
      absl::StatusOr<HttpAnswer> a = HttpCall(s->port(), "GET", "/slow", {}, "", {}, absl::Seconds(60));
      if (a.ok() && a->status == 200 && a->body == "ok") {
        ++ok;
      } else {
        failures[i] = a.ok() ? absl::StrCat("status ", a->status) : a.status().ToString();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200) << failures[0];
}

TEST(HttpServer, ASecondServerOnATakenPortFailsNamingThePort) {
  auto s = Start(Options(), EchoRoutes());
  ASSERT_NE(s, nullptr);
  ServerOptions o = Options();
  o.listen = absl::StrCat("127.0.0.1:", s->port());
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Start(o, EchoRoutes());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("address already in use (port ", s->port(), ") (--test-listen)")));
}

class HttpServerTls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = security::MakeCertificateAuthority("test CA", absl::Hours(1));
    ASSERT_TRUE(ca.ok()) << ca.status();
    security::CertificateRequest server;
    server.common_name = "localhost";
    server.ip_addresses = {"127.0.0.1"};
    security::CertificateRequest client;
    client.common_name = "client";
    client.dns_names = {"localhost"};
    client.server = false;
    client.client = true;
    auto s = security::IssueCertificate(*ca, server);
    auto c = security::IssueCertificate(*ca, client);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(c.ok()) << c.status();
    ca_ = Write("ca.crt", ca->certificate);
    cert_ = Write("server.crt", s->certificate);
    key_ = Write("server.key", s->private_key);
    client_cert_ = Write("client.crt", c->certificate);
    client_key_ = Write("client.key", c->private_key);
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_.path() + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
    return path;
  }
  seam::testing::TempDir dir_{"seam_http_tls"};
  std::string ca_, cert_, key_, client_cert_, client_key_;
};

TEST_F(HttpServerTls, HttpsServesAndAClientCaWantsACertificateItSigned) {
  ServerOptions o = Options();
  o.tls_cert_file = cert_;
  o.tls_key_file = key_;
  auto s = Start(o, EchoRoutes());
  ASSERT_NE(s, nullptr);
  HttpClientOptions tls;
  tls.tls = true;
  tls.ca_file = ca_;
  absl::StatusOr<HttpAnswer> answer = HttpCall(s->port(), "GET", "/hello", {}, "", tls);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->body, "hello");
  s->Stop();

  o.tls_client_ca_file = ca_;
  auto mutual = Start(o, EchoRoutes());
  ASSERT_NE(mutual, nullptr);
  answer = HttpCall(mutual->port(), "GET", "/hello", {}, "", tls);
  EXPECT_TRUE(!answer.ok() || answer->status == 403) << answer->status;
  tls.client_cert_file = client_cert_;
  tls.client_key_file = client_key_;
  answer = HttpCall(mutual->port(), "GET", "/hello", {}, "", tls);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->status, 200);
}

TEST_F(HttpServerTls, AClientThatNeverStartsItsHandshakeIsCutAtTheHeadDeadline) {
  ServerOptions o = Options();
  o.tls_cert_file = cert_;
  o.tls_key_file = key_;
  o.head_timeout = absl::Seconds(1);
  auto s = Start(o, EchoRoutes());
  ASSERT_NE(s, nullptr);
  auto idle = HttpConnection::OpenIdle(s->port());
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_TRUE((*idle)->ClosedWithin(absl::Seconds(10)));
}

}  // namespace
}  // namespace seam::http_server
