// Points the driver loader at the fake vendor libraries built in tests/fakes, with a fixture, and
// reaches their control exports (the same loaded copy the backend uses).
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <string>

#include "drivers/backend_factory.h"

namespace hetpool::testing {

inline std::string FixturePath(const std::string& name) {
  return std::string(HETPOOL_FIXTURE_DIR) + "/" + name + ".json";
}

// Sets the loader path and fixture; restores nothing (each test sets what it needs).
inline void UseFakeVendorLibraries(const std::string& fixture, const std::string& lib_dir = HETPOOL_FAKE_LIB_DIR) {
  setenv("HETPOOL_VENDOR_LIB_PATH", lib_dir.c_str(), 1);
  setenv("HETPOOL_FAKE_FIXTURE", FixturePath(fixture).c_str(), 1);
}

// Control exports of an already loaded fake (dlopen with RTLD_NOLOAD finds the backend's copy).
class FakeControl {
 public:
  explicit FakeControl(const std::string& file, const std::string& lib_dir = HETPOOL_FAKE_LIB_DIR) {
    handle_ = dlopen((lib_dir + "/" + file).c_str(), RTLD_NOW | RTLD_NOLOAD);
  }
  ~FakeControl() {
    if (handle_) dlclose(handle_);
  }
  bool loaded() const { return handle_ != nullptr; }
  void FailCalls(int skip, int calls, int error) {
    reinterpret_cast<void (*)(int, int, int)>(dlsym(handle_, "hetpool_fake_fail_calls"))(skip, calls, error);
  }
  void RemoveDevice(int index) { reinterpret_cast<void (*)(int)>(dlsym(handle_, "hetpool_fake_remove_device"))(index); }
  void Reset() { reinterpret_cast<void (*)()>(dlsym(handle_, "hetpool_fake_reset"))(); }

 private:
  void* handle_ = nullptr;
};

// One backend by name, loaded through CreateBackends (the agent's path); notes go to *notes.
inline absl::StatusOr<std::unique_ptr<drivers::DeviceBackend>> LoadBackend(const std::string& name,
                                                                           std::string* notes = nullptr) {
  drivers::BackendOptions options;
  options.names = {name};
  options.note = [notes](const std::string& line) {
    if (notes) *notes += line + "\n";
  };
  auto backends = drivers::CreateBackends(options);
  if (!backends.ok()) return backends.status();
  if (backends->size() != 1)
    return absl::NotFoundError("backend " + name + " not loaded" + (notes ? ": " + *notes : ""));
  return std::move((*backends)[0]);
}

}  // namespace hetpool::testing
