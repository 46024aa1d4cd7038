// A node's identity on its links: a hello proves its sender holds the key of a
// certificate of the cluster's CA that names the node it claims to be.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "backends/cluster/identity.hpp"
#include "tests/backends/temp_dir.hpp"

using namespace boxrt;
using namespace boxrt::cluster;
namespace fs = std::filesystem;

namespace {

/// A CA, a second CA, and certificates made with the openssl command line.
struct pki {
  testing::temp_dir tmp;
  fs::path dir{tmp.str()};
  pki() {
    ca("ca");
    ca("otherca");
    cert("ca", "n1");
    cert("ca", "evil");
    cert("otherca", "n1-other");
    run("printf '[ca]\\ndefault_ca = c\\n[c]\\ndatabase = index.txt\\nnew_certs_dir = .\\nserial = serial\\n"
        "default_md = sha256\\npolicy = p\\n[p]\\ncommonName = supplied\\n' > expired.cnf && touch index.txt && "
        "echo 01 > serial && openssl req -newkey rsa:2048 -nodes -subj /CN=n1 -keyout n1-old.key -out n1-old.csr "
        "&& openssl ca -batch -config expired.cnf -cert ca.pem -keyfile ca.key -in n1-old.csr -out n1-old.pem "
        "-startdate 20200101000000Z -enddate 20200102000000Z -notext");
  }
  void run(const std::string& cmd) const {
    auto full = "cd '" + dir.string() + "' && (" + cmd + ") >/dev/null 2>&1";
    BOOST_REQUIRE_MESSAGE(std::system(full.c_str()) == 0, cmd);
  }
  void ca(const std::string& name) const {
    run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + name + " -keyout " + name + ".key -out "
        + name + ".pem");
  }
  void cert(const std::string& ca, const std::string& name) const {
    auto cn = name.substr(0, name.find('-') == std::string::npos ? name.size() : name.find('-'));
    run("openssl req -newkey rsa:2048 -nodes -subj /CN=" + cn + " -keyout " + name + ".key -out " + name
        + ".csr && openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca
        + ".key -CAcreateserial -days 2 -out " + name + ".pem");
  }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  std::string pem(const std::string& name) const { return read_pem(path(name + ".pem")); }
  std::string sign(const std::string& name, const std::string& text) const {
    auto s = sign_hello(path(name + ".key"), text);
    BOOST_REQUIRE(s.ok());
    return *s;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cluster_identity_suite)

BOOST_AUTO_TEST_CASE(a_node_proves_it_holds_its_own_certificates_key) {
  pki p;
  const auto nonce = make_nonce();
  BOOST_TEST(nonce.size() == 64u);
  BOOST_TEST(make_nonce() != nonce);
  const auto text = hello_text("n2", nonce, "n1", "127.0.0.1:7001");
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1"), "n1", text, p.sign("n1", text)) == "");
}

// Found by an adversarial pass: any certificate of the cluster's CA could claim a member.
BOOST_AUTO_TEST_CASE(no_other_certificate_or_key_passes_for_a_node) {
  pki p;
  const auto text = hello_text("n2", make_nonce(), "n1", "127.0.0.1:7001");
  // Another node's certificate of the same CA, signed with its own key.
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("evil"), "n1", text, p.sign("evil", text))
             == "its certificate is not node n1's (neither its CN nor a DNS name is n1)");
  // n1's certificate, but a signature by another key.
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1"), "n1", text, p.sign("evil", text))
             == "its hello is not signed by its certificate's key");
  // A signature over another challenge (a replay).
  auto other = hello_text("n2", make_nonce(), "n1", "127.0.0.1:7001");
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1"), "n1", text, p.sign("n1", other))
             == "its hello is not signed by its certificate's key");
  // A certificate named n1 of another CA, and an expired one of the right CA.
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1-other"), "n1", text, p.sign("n1-other", text)).find(
               "its certificate is not valid for the cluster's CA") == 0);
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1-old"), "n1", text, p.sign("n1-old", text))
             == "its certificate is not valid for the cluster's CA: certificate has expired");
  // No certificate, garbage, a signature that is not hex.
  BOOST_TEST(check_hello(p.path("ca.pem"), "", "n1", text, p.sign("n1", text))
             == "its hello carries no certificate (or one over 64 KiB)");
  BOOST_TEST(check_hello(p.path("ca.pem"), "not a certificate", "n1", text, p.sign("n1", text)).find(
               "its hello's certificate cannot be read") == 0);
  BOOST_TEST(check_hello(p.path("ca.pem"), p.pem("n1"), "n1", text, "zz") == "its hello's signature is not hex");
}

BOOST_AUTO_TEST_SUITE_END()
