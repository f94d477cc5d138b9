#pragma once

#include <optional>
#include <string>
#include <utility>

namespace gpurun {

// A value, or why there is none: an expected "no" returned with the result, in place of a
// `std::string& why` out-parameter (docs/ARCHITECTURE.md, "Errors and refusals"). Tests as a bool;
// `*` and `->` reach the value when there is one.
template <class T>
struct OrWhy {
  std::optional<T> value;
  std::string why;

  OrWhy(T v) : value(std::move(v)) {}  // NOLINT(google-explicit-constructor): return the value itself
  static OrWhy none(std::string why) {
    OrWhy r;
    r.why = std::move(why);
    return r;
  }
  explicit operator bool() const { return value.has_value(); }
  T& operator*() { return *value; }
  const T& operator*() const { return *value; }
  T* operator->() { return &*value; }
  const T* operator->() const { return &*value; }

 private:
  OrWhy() = default;
};

}  // namespace gpurun
