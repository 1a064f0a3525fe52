// parse_bandwidth, parse_duration and parse_size (see units.h).
#include <cctype>    // std::tolower: the prefix letter
#include <charconv>  // std::from_chars: strict, locale-free number parsing
#include <cmath>     // std::isfinite, pow
#include <optional>  // number_and_unit
#include <string_view>
#include <utility>  // std::pair: prefix table

#include "config/units.h"
#include "core/error.h"  // InputError, DTRAIN_INPUT_CHECK

namespace dtrain {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "1.5GBps" into 1.5 and "GBps"; nullopt when it does not start with a finite number.
std::optional<std::pair<double, std::string_view>> number_and_unit(std::string_view text) {
  text = trim(text);
  if (!text.empty() && text[0] == '+') text.remove_prefix(1);
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value)) return std::nullopt;
  return std::pair{value, trim(std::string_view(ptr, text.data() + text.size() - ptr))};
}

}  // namespace

double parse_bandwidth(const std::string& text) {
  const char* hint =
      "expected a rate such as 10Gbps, 100Mbps (bits per second) or 1.5GBps (bytes per second)";
  auto parsed = number_and_unit(text);
  DTRAIN_INPUT_CHECK(parsed) << "bad bandwidth '" << text << "': " << hint;
  auto [value, unit] = *parsed;
  // Network rates use decimal prefixes (10 GbE = 10^10 bit/s); the prefix's case is forgiven,
  // the b/B is not, because it is the factor of 8.
  constexpr std::pair<char, double> kPrefixes[] = {{'k', 1e3}, {'m', 1e6}, {'g', 1e9}, {'t', 1e12}};
  double scale = 1;
  for (auto [letter, factor] : kPrefixes) {
    if (!unit.empty() && std::tolower(static_cast<unsigned char>(unit[0])) == letter) {
      scale = factor;
      unit.remove_prefix(1);
      break;
    }
  }
  double bytes_per_unit = 0;
  if (unit == "bps" || unit == "b/s" || unit == "bit/s")
    bytes_per_unit = 1.0 / 8;
  else if (unit == "Bps" || unit == "B/s")
    bytes_per_unit = 1;
  DTRAIN_INPUT_CHECK(bytes_per_unit > 0) << "bad bandwidth '" << text << "': " << hint;
  double rate = value * scale * bytes_per_unit;
  DTRAIN_INPUT_CHECK(rate > 0 && std::isfinite(rate))
      << "bad bandwidth '" << text << "': must be > 0";
  return rate;
}

double parse_duration(const std::string& text) {
  const char* hint = "expected a time such as 20us, 1ms, 0.5s or 100ns";
  auto parsed = number_and_unit(text);
  DTRAIN_INPUT_CHECK(parsed) << "bad duration '" << text << "': " << hint;
  auto [value, unit] = *parsed;
  double scale = 0;
  if (unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us" || unit == "\u00b5s")
    scale = 1e-6;
  else if (unit == "ns")
    scale = 1e-9;
  else if (unit.empty() && value == 0)
    scale = 1;  // zero needs no unit
  DTRAIN_INPUT_CHECK(scale > 0) << "bad duration '" << text << "': " << hint;
  DTRAIN_INPUT_CHECK(value >= 0) << "bad duration '" << text << "': must be >= 0";
  return value * scale;
}

double parse_size(const std::string& text) {
  const char* hint = "expected a size such as 20GB, 800MB (decimal) or 512MiB, 16GiB (binary)";
  auto parsed = number_and_unit(text);
  DTRAIN_INPUT_CHECK(parsed) << "bad size '" << text << "': " << hint;
  auto [value, unit] = *parsed;
  // The B is required (a lower-case b would be bits, as in a rate); the prefix's case is
  // forgiven, and an i after it makes it binary.
  DTRAIN_INPUT_CHECK(!unit.empty() && unit.back() == 'B') << "bad size '" << text << "': " << hint;
  unit.remove_suffix(1);
  double scale = unit.empty() ? 1 : 0;
  const bool binary = !unit.empty() && unit.back() == 'i';
  if (binary) unit.remove_suffix(1);
  constexpr char kPrefixes[] = {'k', 'm', 'g', 't'};
  for (int i = 0; i < 4 && unit.size() == 1; ++i)
    if (std::tolower(static_cast<unsigned char>(unit[0])) == kPrefixes[i])
      scale = std::pow(binary ? 1024.0 : 1000.0, i + 1);
  DTRAIN_INPUT_CHECK(scale > 0) << "bad size '" << text << "': " << hint;
  const double bytes = value * scale;
  DTRAIN_INPUT_CHECK(bytes >= 1 && std::isfinite(bytes))
      << "bad size '" << text << "': must be at least 1 byte";
  return bytes;
}

}  // namespace dtrain
