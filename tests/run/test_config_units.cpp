// parse_bandwidth, parse_duration and parse_size.
#include <doctest/doctest.h>

#include "core/error.h"
#include "run/config.h"

using namespace dtrain;

TEST_CASE("bandwidth: bits or bytes per second with decimal prefixes") {
  CHECK(parse_bandwidth("10Gbps") == doctest::Approx(1.25e9));
  CHECK(parse_bandwidth("1Gbps") == doctest::Approx(1.25e8));
  CHECK(parse_bandwidth("100Mbps") == doctest::Approx(1.25e7));
  CHECK(parse_bandwidth("1.5GBps") == doctest::Approx(1.5e9));
  CHECK(parse_bandwidth("800kbps") == doctest::Approx(1e5));
  CHECK(parse_bandwidth("25 Gbit/s") == doctest::Approx(3.125e9));
  CHECK(parse_bandwidth("2GB/s") == doctest::Approx(2e9));
  CHECK(parse_bandwidth("1e3Bps") == doctest::Approx(1e3));
  for (const char* bad : {"", "fast", "10", "10G", "10Gbs", "10 Gibps", "0Gbps", "-1Gbps", "Gbps",
                          "infGbps", "10Gbpsx"})
    CHECK_THROWS_AS(parse_bandwidth(bad), InputError);
  CHECK_THROWS_WITH(parse_bandwidth("10Gbs"), doctest::Contains("bad bandwidth '10Gbs'"));
}

TEST_CASE("duration: ns, us, ms, s; zero needs no unit") {
  CHECK(parse_duration("20us") == doctest::Approx(20e-6));
  CHECK(parse_duration("1ms") == doctest::Approx(1e-3));
  CHECK(parse_duration("0.5s") == doctest::Approx(0.5));
  CHECK(parse_duration("2s") == 2);
  CHECK(parse_duration("100ns") == doctest::Approx(1e-7));
  CHECK(parse_duration("0") == 0);
  CHECK(parse_duration("0us") == 0);
  for (const char* bad : {"", "soon", "20", "20 minutes", "-1ms", "1h", "nan s"})
    CHECK_THROWS_AS(parse_duration(bad), InputError);
  CHECK_THROWS_WITH(parse_duration("-1ms"), doctest::Contains(">= 0"));
}

TEST_CASE("sizes: decimal and binary prefixes, the B required") {
  CHECK(parse_size("20GB") == doctest::Approx(2e10));
  CHECK(parse_size("800MB") == doctest::Approx(8e8));
  CHECK(parse_size("1.5TB") == doctest::Approx(1.5e12));
  CHECK(parse_size("512MiB") == doctest::Approx(512.0 * 1024 * 1024));
  CHECK(parse_size("16 GiB") == doctest::Approx(16.0 * 1024 * 1024 * 1024));
  CHECK(parse_size("4kB") == doctest::Approx(4000));
  CHECK(parse_size("4KiB") == doctest::Approx(4096));
  CHECK(parse_size("4096B") == doctest::Approx(4096));
  for (const char* bad :
       {"", "big", "20", "20G", "20Gb", "20GiBs", "0GB", "-1GB", "GB", "20XB", "0.5B", "infGB"})
    CHECK_THROWS_AS(parse_size(bad), InputError);
  CHECK_THROWS_WITH(parse_size("20Gb"), doctest::Contains("bad size '20Gb'"));
}
