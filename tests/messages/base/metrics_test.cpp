// The metrics registry: bounded families, histogram buckets, label escaping and slugs.
// (The whole scrape is parsed by Prometheus's own parser in tests/conformance.)
#include <boost/test/unit_test.hpp>

#include "messages/base/metrics.hpp"
#include "messages/base/version.hpp"

using namespace boxrt;

BOOST_AUTO_TEST_SUITE(metrics_registry)

BOOST_AUTO_TEST_CASE(a_family_hands_out_one_series_per_label_set) {
  metrics::family<metrics::counter> f{{"action", "result"}};
  auto& a = f.with({"box_exec", "ok"});
  a.inc();
  f.with({"box_exec", "ok"}).inc(2);
  BOOST_CHECK_EQUAL(&a, &f.with({"box_exec", "ok"}));
  BOOST_CHECK_EQUAL(a.value(), 3u);
  BOOST_CHECK_NE(&a, &f.with({"box_exec", "BoxAdmissionError"}));
}

BOOST_AUTO_TEST_CASE(past_its_cap_a_family_folds_new_label_sets_into_other) {
  metrics::family<metrics::counter> f{{"reason"}, 4};
  for (int i = 0; i < 100; ++i)
    f.with({"reason-" + std::to_string(i)}).inc();
  size_t series = 0;
  uint64_t other = 0;
  f.each([&](const std::vector<std::string>& values, const metrics::counter& c) {
    ++series;
    if (values[0] == "other")
      other = c.value();
  });
  BOOST_CHECK_EQUAL(series, 4u);
  BOOST_CHECK_EQUAL(other, 97u);
}

BOOST_AUTO_TEST_CASE(histogram_buckets_are_cumulative) {
  metrics::duration_histogram h;
  h.observe_ns(10'000);          // 10 µs: first bucket
  h.observe_ns(2'000'000);       // 2 ms: le 0.0025
  h.observe_ns(120'000'000'000); // 2 min: only +Inf
  auto c = h.cumulative();
  BOOST_CHECK_EQUAL(c[0], 1u);
  BOOST_CHECK_EQUAL(c[5], 2u); // le 0.0025
  BOOST_CHECK_EQUAL(c[c.size() - 2], 2u);
  BOOST_CHECK_EQUAL(c.back(), 3u);
  BOOST_CHECK_EQUAL(h.sum_ns(), 120'002'010'000u);
}

BOOST_AUTO_TEST_CASE(the_scrape_escapes_label_values_and_names_every_family) {
  metrics::boxd().requests.with({"unknown", "quote\"back\\slash\nline"}).inc();
  auto text = metrics::render({});
  BOOST_CHECK(text.find(R"(result="quote\"back\\slash\nline")") != std::string::npos);
  for (auto name : {"boxd_requests_total", "boxd_request_duration_seconds", "boxd_sessions",
                    "boxd_admission_decisions_total", "boxd_revocations_total",
                    "boxd_outbound_queue_bytes", "boxd_connections", "boxd_decode_errors_total",
                    "boxd_pool_queue_depth", "boxd_pool_threads", "process_cpu_seconds_total",
                    "process_resident_memory_bytes", "process_open_fds"})
    BOOST_CHECK_MESSAGE(text.find(std::string{"# TYPE "} + name + " ") != std::string::npos, name);
  // The version that runs, as a constant series.
  auto info = "boxd_build_info{version=\"" + std::string{version()} + "\",git=\"" + std::string{git_describe()}
              + "\",build_type=\"" + std::string{build_type()} + "\"} 1\n";
  BOOST_CHECK_MESSAGE(text.find(info) != std::string::npos, info);
}

BOOST_AUTO_TEST_CASE(reason_slugs_keep_the_fixed_part_of_a_text) {
  BOOST_CHECK_EQUAL(metrics::reason_slug("Sandbox admission grant has expired"),
                    "sandbox_admission_grant_has_expired");
  BOOST_CHECK_EQUAL(metrics::reason_slug("Managed sandbox policy fields are host-controlled: cpus, x"),
                    "managed_sandbox_policy_fields_are_host_controlled");
  BOOST_CHECK_EQUAL(metrics::reason_slug(":::"), "unspecified");
  BOOST_CHECK_LE(metrics::reason_slug(std::string(500, 'a')).size(), 64u);
}

BOOST_AUTO_TEST_SUITE_END()
