#pragma once

namespace gpurun {

// A move-only owner of a handle (a file descriptor, a child process): `Close` runs on it when
// the owner goes, unless it was released. `kNone` marks an owner that holds nothing.
template <typename T, T kNone, void (*Close)(T)>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(T value) : value_(value) {}
  UniqueHandle(UniqueHandle&& other) noexcept : value_(other.release()) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      value_ = other.release();
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  T get() const { return value_; }
  explicit operator bool() const { return value_ != kNone; }
  // Gives the handle up without closing it.
  T release() {
    const T value = value_;
    value_ = kNone;
    return value;
  }
  void reset() {
    if (value_ != kNone) Close(release());
  }

 private:
  T value_ = kNone;
};

}  // namespace gpurun
