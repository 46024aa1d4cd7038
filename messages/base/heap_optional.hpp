// An optional value kept on the heap: one pointer while empty. For rarely set, large
// members of objects there are many of (a workspace's admission grant and snapshot),
// with the parts of std::optional's interface they use.
#pragma once

#include <memory>
#include <utility>

namespace boxrt {

template <class T>
class heap_optional {
 public:
  heap_optional() = default;
  heap_optional(const T& x) : p_(std::make_unique<T>(x)) {}
  heap_optional(T&& x) : p_(std::make_unique<T>(std::move(x))) {}
  heap_optional(const heap_optional& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  heap_optional(heap_optional&&) noexcept = default;
  heap_optional& operator=(const heap_optional& o) {
    if (this != &o)
      p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  heap_optional& operator=(heap_optional&&) noexcept = default;
  heap_optional& operator=(const T& x) {
    p_ = std::make_unique<T>(x);
    return *this;
  }
  heap_optional& operator=(T&& x) {
    p_ = std::make_unique<T>(std::move(x));
    return *this;
  }

  bool has_value() const noexcept { return p_ != nullptr; }
  explicit operator bool() const noexcept { return has_value(); }
  void reset() noexcept { p_.reset(); }

  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }

  friend bool operator==(const heap_optional& a, const heap_optional& b) {
    return a.has_value() == b.has_value() && (!a || *a == *b);
  }

 private:
  std::unique_ptr<T> p_;
};

} // namespace boxrt
