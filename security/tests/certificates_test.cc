// The ephemeral CA and its certificates: they verify, carry the SANs a
// loopback pipeline is reached by, and are written readable by the owner only.
#include "seam/security/certificates.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "seam/security/local_credentials.h"
#include "seam/testing/temp_dir.h"

namespace seam::security {
namespace {

CertificateRequest LoopbackServer() {
  CertificateRequest r;
  r.common_name = "localhost";
  r.dns_names = {"localhost"};
  r.ip_addresses = {"127.0.0.1"};
  return r;
}

TEST(Certificates, IssuedCertificateVerifiesAgainstItsCa) {
  auto ca = MakeCertificateAuthority("test CA", absl::Hours(1));
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto leaf = IssueCertificate(*ca, LoopbackServer());
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  EXPECT_TRUE(VerifyCertificate(ca->certificate, leaf->certificate).ok());
  EXPECT_TRUE(VerifyCertificate(ca->certificate, ca->certificate).ok());
}

TEST(Certificates, CertificateOfAnotherCaDoesNotVerify) {
  auto ca = MakeCertificateAuthority("test CA", absl::Hours(1));
  auto other = MakeCertificateAuthority("other CA", absl::Hours(1));
  ASSERT_TRUE(ca.ok() && other.ok());
  auto leaf = IssueCertificate(*other, LoopbackServer());
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  const absl::Status s = VerifyCertificate(ca->certificate, leaf->certificate);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_NE(s.message().find("unable to get local issuer certificate"), std::string::npos) << s;
}

TEST(Certificates, IssuedCertificateCarriesTheRequestedSans) {
  auto ca = MakeCertificateAuthority("test CA", absl::Hours(1));
  ASSERT_TRUE(ca.ok());
  CertificateRequest r = LoopbackServer();
  r.ip_addresses.push_back("::1");
  auto leaf = IssueCertificate(*ca, r);
  ASSERT_TRUE(leaf.ok()) << leaf.status();
  auto sans = SubjectAltNames(leaf->certificate);
  ASSERT_TRUE(sans.ok()) << sans.status();
  EXPECT_EQ(*sans, (std::vector<std::string>{"IP:127.0.0.1", "IP:::1", "DNS:localhost"}));
}

TEST(Certificates, KeysAreEcP256) {
  auto ca = MakeCertificateAuthority("test CA", absl::Hours(1));
  ASSERT_TRUE(ca.ok());
  BIO* bio = BIO_new_mem_buf(ca->private_key.data(), static_cast<int>(ca->private_key.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  ASSERT_NE(key, nullptr);
  char group[64] = {};
  size_t length = 0;
  EXPECT_EQ(EVP_PKEY_get_group_name(key, group, sizeof(group), &length), 1);
  EXPECT_STREQ(group, "prime256v1");
  EVP_PKEY_free(key);
  BIO_free(bio);
}

TEST(Certificates, BadRequestsAreInvalidArguments) {
  auto ca = MakeCertificateAuthority("test CA", absl::Hours(1));
  ASSERT_TRUE(ca.ok());
  CertificateRequest bad_ip = LoopbackServer();
  bad_ip.ip_addresses = {"127.0.0.300"};
  EXPECT_EQ(IssueCertificate(*ca, bad_ip).status().code(), absl::StatusCode::kInvalidArgument);
  CertificateRequest no_names;
  no_names.common_name = "x";
  EXPECT_EQ(IssueCertificate(*ca, no_names).status().code(), absl::StatusCode::kInvalidArgument);
  PemCertificate garbage{"not a certificate", "not a key"};
  EXPECT_EQ(IssueCertificate(garbage, LoopbackServer()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalCredentials, FilesAreOwnerOnlyAndChainToTheirCa) {
  const seam::testing::TempDir dir("seam_local_credentials");
  auto files = WriteLocalCredentials(dir.path());
  ASSERT_TRUE(files.ok()) << files.status();
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  for (const std::string& path : {files->ca_cert, files->server_cert, files->server_key, files->client_cert,
                                  files->client_key, files->token}) {
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << path;
  }
  EXPECT_TRUE(VerifyCertificate(read(files->ca_cert), read(files->server_cert)).ok());
  EXPECT_TRUE(VerifyCertificate(read(files->ca_cert), read(files->client_cert)).ok());
  const std::string token = read(files->token);
  EXPECT_EQ(token.size(), 65u);  // 64 hex characters and a newline
  auto again = RandomToken();
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again + "\n", token);
}

TEST(LocalCredentials, TheServerCertificateAlsoNamesTheHostsItIsGiven) {
  const seam::testing::TempDir dir("seam_local_credentials_names");
  auto files = WriteLocalCredentials(dir.path(), absl::Hours(1), {"10.1.2.3", "node-7.example"});
  ASSERT_TRUE(files.ok()) << files.status();
  std::ifstream in(files->server_cert);
  std::stringstream pem;
  pem << in.rdbuf();
  auto sans = SubjectAltNames(pem.str());
  ASSERT_TRUE(sans.ok()) << sans.status();
  EXPECT_EQ(*sans, (std::vector<std::string>{"IP:127.0.0.1", "IP:10.1.2.3", "DNS:localhost", "DNS:node-7.example"}));
}

}  // namespace
}  // namespace seam::security
