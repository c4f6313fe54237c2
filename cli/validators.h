// Command-line validators whose messages say what was expected. (CLI11's PositiveNumber reports
// "Value 0 not in range 0.000000 to 1797693...", a range of doubles printed in full.)
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/precision.h"

namespace loom {

// A whole number above zero (that fits in 64 bits).
inline CLI::Validator PositiveInteger() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || *end != '\0' || errno == ERANGE || v <= 0) {
          return "expected a positive whole number, got '" + s + "'";
        }
        return std::string();
      },
      "POSITIVE");
}

// A finite number >= 0 (a tolerance).
inline CLI::Validator NonNegativeNumber() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(s.c_str(), &end);
        // (ERANGE on underflow is fine: a tiny tolerance is still a tolerance.)
        if (s.empty() || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
          return "expected a number >= 0, got '" + s + "'";
        }
        return std::string();
      },
      "NUMBER");
}

// A finite number above zero and at most `max` (a duration).
inline CLI::Validator PositiveNumber(double max) {
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !(v > 0) || !(v <= max)) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%g", max);
          return "expected a number above 0 and at most " + std::string(buf) + ", got '" + s + "'";
        }
        return std::string();
      },
      "POSITIVE");
}

// A path (for options where an empty value would otherwise read as "not given").
inline CLI::Validator NonEmptyPath() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        return s.empty() ? "expected a path, got an empty string" : std::string();
      },
      "PATH");
}

// The compute precision, as the job file's `precision` reads it (CLI11's IsMember reports
// "bf17 not in {fp32,bf16}").
inline CLI::Validator PrecisionFlag() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        Result<Precision> p = ParsePrecision(s);
        return p.ok() ? std::string() : p.status().message();
      },
      "fp32|bf16");
}

}  // namespace loom
