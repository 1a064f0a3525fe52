// Errors and check macros. Two kinds of failure, mapped to exit codes once, in main:
//   InputError — bad usage, config or input file (exit 2): the message names the culprit.
//   Error      — runtime failure (exit 1): carries file:line of the failed check.
#pragma once
#include <sstream>    // std::ostringstream: message building in CheckFailure
#include <stdexcept>  // std::runtime_error: base of both error kinds
#include <string>

namespace dtrain {

// A runtime failure: exit code 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad usage, bad config or a bad input file: exit code 2. Nothing may have been written yet.
class InputError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// Collects the streamed message of a failed check and throws from its destructor, so that
// `DTRAIN_CHECK(x) << "why " << value;` reads like a log line and costs nothing when x holds.
template <typename E>
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    if (condition) stream_ << file << ":" << line << ": check '" << condition << "' failed: ";
  }
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() noexcept(false) { throw E(stream_.str()); }
  template <typename T>
  CheckFailure& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};
}  // namespace detail

}  // namespace dtrain

// Internal invariant or runtime condition; failure → dtrain::Error with file:line.
#define DTRAIN_CHECK(cond) \
  if (cond) {              \
  } else                   \
    ::dtrain::detail::CheckFailure<::dtrain::Error>(__FILE__, __LINE__, #cond)

// User-facing validation; failure → dtrain::InputError whose text is only the streamed message.
#define DTRAIN_INPUT_CHECK(cond) \
  if (cond) {                    \
  } else                         \
    ::dtrain::detail::CheckFailure<::dtrain::InputError>(nullptr, 0, nullptr)
