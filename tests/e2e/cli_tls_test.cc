// TLS and mutual TLS between the coordinator, the CLI and worker daemons,
// with certificates made by openssl for each test: a client that trusts the
// coordinator's CA gets through, one that does not is refused, and with
// --tls-client-ca only clients and workers holding a certificate from that
// CA are let in.
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/coordinator_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/worker_process.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kStartTimeout = absl::Seconds(30);

// Makes `name`.key and `name`.pem signed by `ca` (self-signed when `ca` is
// empty); `extensions` are x509v3 lines such as the server's
// subjectAltName.
constexpr char kMakeCertificate[] = R"(
set -e
make() {
  name=$1 ca=$2 ext=$3
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout $name.key -subj /CN=$name -out $name.csr 2>/dev/null
  printf '%s\n' "$ext" > $name.ext
  if [ -z "$ca" ]; then
    openssl x509 -req -in $name.csr -signkey $name.key -days 2 -extfile $name.ext \
      -out $name.pem 2>/dev/null
  else
    openssl x509 -req -in $name.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -days 2 \
      -extfile $name.ext -out $name.pem 2>/dev/null
  fi
}
make ca '' 'basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign'
make other-ca '' 'basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign'
make server ca 'subjectAltName=IP:127.0.0.1,DNS:localhost'
make client ca 'extendedKeyUsage=clientAuth'
make stranger other-ca 'extendedKeyUsage=clientAuth'
)";

class CliTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcessResult made =
        RunProcess({"/bin/sh", "-c", kMakeCertificate}, dir_.path());
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }

  std::string File(const std::string& name) { return dir_.path() + "/" + name; }

  void StartCoordinator(bool require_client_certificates) {
    std::vector<std::string> flags = {
        "--db",      ":memory:",        "--tls-cert", File("server.pem"),
        "--tls-key", File("server.key")};
    if (require_client_certificates) {
      flags.insert(flags.end(), {"--tls-client-ca", File("ca.pem")});
    }
    absl::StatusOr<CoordinatorProcess> coordinator =
        CoordinatorProcess::Start(CHIMERA_COORDINATOR_BINARY, flags);
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    address_ = coordinator_->address();
  }

  // `chimera workers -o json` with `tls` flags.
  ProcessResult Workers(const std::vector<std::string>& tls) {
    std::vector<std::string> argv = {CHIMERA_BINARY, "workers",   "-o",
                                     "json",         "--address", address_,
                                     "--timeout",    "5"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    return RunProcess(argv);
  }

  std::unique_ptr<net::ChildProcess> StartWorker(
      const std::string& id, const std::vector<std::string>& tls) {
    return testing::StartWorkerDaemon({.binary = CHIMERA_WORKER_BINARY,
                                       .coordinator = address_,
                                       .worker_id = id,
                                       .work_dir = File(id),
                                       .flags = tls,
                                       .log_file = File(id + ".log")});
  }

  // What worker `id` logged; empty until it has logged something.
  std::string Log(const std::string& id) {
    constexpr uint64_t kMaxLogBytes = 16 << 20;
    return ReadTextFile(File(id + ".log"), kMaxLogBytes).value_or("");
  }

  // The ids of the registered workers once `count` are, as `client_tls`
  // sees them; empty if they never are.
  std::vector<std::string> AwaitWorkers(
      size_t count, const std::vector<std::string>& client_tls) {
    const absl::Time deadline = absl::Now() + kStartTimeout;
    while (absl::Now() < deadline) {
      ProcessResult listed = Workers(client_tls);
      if (listed.exit_code == 0) {
        const nlohmann::json answer = nlohmann::json::parse(listed.out);
        std::vector<std::string> ids;
        for (const auto& worker : answer["workers"]) {
          ids.push_back(worker["workerId"]);
        }
        if (ids.size() >= count) return ids;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    return {};
  }

  chimera::testing::TempDir dir_;
  std::optional<CoordinatorProcess> coordinator_;
  // Empty until the coordinator is up: a test goes on after a failed start.
  std::string address_;
};

TEST_F(CliTlsTest, ClientsAndWorkersThatTrustTheCoordinatorsCaGetThrough) {
  StartCoordinator(/*require_client_certificates=*/false);
  const std::vector<std::string> trusting = {"--tls-ca", File("ca.pem")};
  EXPECT_EQ(Workers(trusting).exit_code, 0);

  ProcessResult plaintext = Workers({});
  EXPECT_NE(plaintext.exit_code, 0);
  EXPECT_THAT(plaintext.err, HasSubstr("UNAVAILABLE"));
  ProcessResult wrong_ca = Workers({"--tls-ca", File("other-ca.pem")});
  EXPECT_NE(wrong_ca.exit_code, 0);
  EXPECT_THAT(wrong_ca.err, HasSubstr("UNAVAILABLE"));

  auto worker = StartWorker("tls-worker", trusting);
  EXPECT_THAT(AwaitWorkers(1, trusting), ::testing::ElementsAre("tls-worker"))
      << Log("tls-worker");
}

TEST_F(CliTlsTest, MutualTlsAdmitsOnlyCertificatesFromTheClientCa) {
  StartCoordinator(/*require_client_certificates=*/true);
  const std::vector<std::string> with_certificate = {
      "--tls-ca",         File("ca.pem"), "--tls-cert",
      File("client.pem"), "--tls-key",    File("client.key")};
  EXPECT_EQ(Workers(with_certificate).exit_code, 0)
      << Workers(with_certificate).err;

  ProcessResult without_certificate = Workers({"--tls-ca", File("ca.pem")});
  EXPECT_NE(without_certificate.exit_code, 0);
  EXPECT_THAT(without_certificate.err, HasSubstr("UNAVAILABLE"));
  ProcessResult stranger =
      Workers({"--tls-ca", File("ca.pem"), "--tls-cert", File("stranger.pem"),
               "--tls-key", File("stranger.key")});
  EXPECT_NE(stranger.exit_code, 0);
  EXPECT_THAT(stranger.err, HasSubstr("UNAVAILABLE"));

  auto refused = StartWorker("no-certificate", {"--tls-ca", File("ca.pem")});
  auto admitted = StartWorker("with-certificate", with_certificate);
  EXPECT_THAT(AwaitWorkers(1, with_certificate),
              ::testing::ElementsAre("with-certificate"));
  // The refused worker keeps trying and says why in its log.
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (!absl::StrContains(Log("no-certificate"), "cannot register") &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_THAT(Log("no-certificate"), HasSubstr("cannot register"));
  EXPECT_EQ(AwaitWorkers(1, with_certificate).size(), 1u);
}

TEST_F(CliTlsTest, IncompleteOrUnreadableTlsFlagsAreBadInputNamingTheFlag) {
  ProcessResult coordinator =
      RunProcess({CHIMERA_COORDINATOR_BINARY, "--listen", "127.0.0.1:0", "--db",
                  ":memory:", "--tls-cert", File("server.pem")});
  EXPECT_EQ(coordinator.exit_code, 2);
  EXPECT_THAT(coordinator.err, HasSubstr("--tls-key"));

  ProcessResult client =
      RunProcess({CHIMERA_BINARY, "list", "--address", "127.0.0.1:1",
                  "--tls-cert", File("client.pem")});
  EXPECT_EQ(client.exit_code, 2);
  EXPECT_THAT(client.err, HasSubstr("--tls-key"));

  ProcessResult worker =
      RunProcess({CHIMERA_WORKER_BINARY, "daemon", "--coordinator", "127.0.0.1:1",
                  "--tls-ca", File("missing.pem")});
  EXPECT_EQ(worker.exit_code, 2);
  EXPECT_THAT(worker.err, HasSubstr("--tls-ca"));
  EXPECT_THAT(worker.err, HasSubstr("missing.pem"));
}

// gRPC takes any bytes as PEM and fails later: a coordinator said only
// "cannot listen on ...", a client only UNAVAILABLE.
TEST_F(CliTlsTest, TlsFilesThatAreNotWhatTheirFlagWantsAreBadInputNamingFileAndProblem) {
  const std::string not_pem = dir_.WriteFile("notes.txt", "not a certificate\n");
  const ProcessResult encrypted =
      RunProcess({chimera::testing::FindOnPath("openssl"), "pkcs8", "-topk8", "-in",
                  File("server.key"), "-passout", "pass:secret", "-out", File("encrypted.key")});
  ASSERT_EQ(encrypted.exit_code, 0) << encrypted.err;
  const auto coordinator = [&](const std::string& certificate, const std::string& key,
                               const std::string& client_ca = "") {
    std::vector<std::string> argv = {CHIMERA_COORDINATOR_BINARY, "--listen", "127.0.0.1:0",
                                     "--db", ":memory:", "--tls-cert", certificate,
                                     "--tls-key", key};
    if (!client_ca.empty()) argv.insert(argv.end(), {"--tls-client-ca", client_ca});
    return RunProcess(argv);
  };
  const struct {
    ProcessResult result;
    std::string expected;
  } cases[] = {
      {coordinator(File("server.key"), File("server.key")),
       "--tls-cert: '" + File("server.key") + "' holds no PEM certificate"},
      {coordinator(File("server.pem"), File("server.pem")),
       "--tls-key: '" + File("server.pem") + "' holds no PEM private key"},
      {coordinator(File("server.pem"), File("client.key")),
       "--tls-key: '" + File("client.key") +
           "' is not the private key of the certificate in --tls-cert: '" +
           File("server.pem") + "'"},
      {coordinator(File("server.pem"), File("encrypted.key")),
       "--tls-key: '" + File("encrypted.key") +
           "' holds an encrypted private key; gRPC takes no passphrase"},
      {coordinator(File("server.pem"), File("server.key"), not_pem),
       "--tls-client-ca: '" + not_pem + "' holds no PEM certificate"},
      {RunProcess({CHIMERA_BINARY, "list", "--address", "127.0.0.1:1", "--tls-ca", not_pem}),
       "--tls-ca: '" + not_pem + "' holds no PEM certificate"},
      {RunProcess({CHIMERA_WORKER_BINARY, "daemon", "--coordinator", "127.0.0.1:1", "--tls-ca",
                   File("ca.pem"), "--tls-cert", File("client.pem"), "--tls-key", not_pem}),
       "--tls-key: '" + not_pem + "' holds no PEM private key"},
  };
  for (const auto& [result, expected] : cases) {
    EXPECT_EQ(result.exit_code, 2) << expected << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr(expected));
    EXPECT_THAT(result.err, Not(HasSubstr("cannot listen")));
  }
}

}  // namespace
}  // namespace chimera
