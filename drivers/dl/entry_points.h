// Helpers for a vendor's entry-point list, written once as an X-macro list
// X(name, return type, (parameters)) and expanded into declarations, a table of function
// pointers, and the dlsym calls that fill it: one list per vendor, so the declarations, the
// table and the loading cannot drift apart (docs/discovery.md).
#pragma once

// Declares `ret name params;` (used inside extern "C" by the ABI headers and the fakes).
#define HETPOOL_DECLARE_ENTRY_POINT(name, ret, params) ret name params;
// A member `ret (*name) params = nullptr;` of an entry-point table.
#define HETPOOL_ENTRY_POINT_MEMBER(name, ret, params) ret(*name) params = nullptr;
// Inside a function returning absl::Status with a DynamicLibrary `lib` and a table `t` (the
// resolve callback of OpenVendorLibrary).
#define HETPOOL_REQUIRE_ENTRY_POINT(name, ret, params) \
  if (auto s = lib.Require(#name, &t.name); !s.ok()) return s;
#define HETPOOL_OPTIONAL_ENTRY_POINT(name, ret, params) lib.Optional(#name, &t.name);
