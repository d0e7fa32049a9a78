// The subset of MetaX MXSML's C ABI (libmxsml.so) hetpool uses. Confirmed layouts (device info,
// memory info, error strings) follow MetaX's own adaptation of mxsml in nvtop. The topology,
// MetaXLink and version calls follow ../shared/docs/VENDORS.md and are UNCONFIRMED: they are
// optional symbols, so a library that differs only loses the link map, not the devices.
#pragma once

#include "drivers/dl/entry_points.h"

extern "C" {

typedef unsigned int mxSmlReturn_t;
enum : unsigned { MXSML_SUCCESS = 0, MXSML_FAILURE = 1, MXSML_NO_DEVICE = 2, MXSML_DEVICE_LOST = 9 };
enum : unsigned {
  MXSML_DEVICE_BDF_ID_SIZE = 32,
  MXSML_DEVICE_UUID_SIZE = 96,
  MXSML_DEVICE_NAME_SIZE = 32,
  MXSML_METAXLINK_MAX_LINKS = 7
};

typedef struct {
  unsigned int deviceId;
  int type;  // deprecated
  char bdfId[MXSML_DEVICE_BDF_ID_SIZE];
  unsigned int gpuId;
  unsigned int nodeId;  // whether this is the NUMA node is unconfirmed: sysfs is used
  char uuid[MXSML_DEVICE_UUID_SIZE];
  int brand;  // 1 N-class, 2 C-class, 3 G-class
  int mode;   // 0 bare metal, 1 PF, 2 VF
  char deviceName[MXSML_DEVICE_NAME_SIZE];
} mxSmlDeviceInfo_t;

typedef struct {  // KB
  long visVramTotal;
  long visVramUse;
  long vramTotal;
  long vramUse;
  long xttTotal;
  long xttUse;
} mxSmlMemoryInfo_t;

// One process and the cards it holds (mxSmlGetSingleGpuProcess, v1 layout as in MetaX's
// mxsml.h: gpuMemoryUsage in bytes). The v2/v3 layouts add die and sGPU ids hetpool does not need.
enum : unsigned { MXSML_PROCESS_NAME_SIZE = 64, MXSML_MAX_GPU_NUM_USED_BY_PROCESS = 64 };
typedef struct {
  char bdfId[MXSML_DEVICE_BDF_ID_SIZE];
  unsigned int gpuId;
  unsigned long gpuMemoryUsage;
} mxSmlProcessGpuInfo_t;
typedef struct {
  unsigned int processId;
  char processName[MXSML_PROCESS_NAME_SIZE];
  unsigned int gpuNumber;
  mxSmlProcessGpuInfo_t processGpuInfo[MXSML_MAX_GPU_NUM_USED_BY_PROCESS];
} mxSmlProcessInfo_t;

// Topology levels: INTERNAL 0, SINGLE 1, MULTIPLE 2, HOSTBRIDGE 3, NODE 4, METAXLINK 5, SYSTEM 6.
typedef int mxSmlDeviceTopologyLevel_t;
typedef struct {
  unsigned int deviceId;
  char bdfId[MXSML_DEVICE_BDF_ID_SIZE];
} mxSmlMetaXLinkRemoteInfo_t;

// Health (as in MetaX's pymxsml binding of mxsml.h): ECC counts, why a card is unavailable, and
// its PCIe link now and at most.
typedef struct {
  unsigned int sramCE, sramUE, dramCE, dramUE, retiredPage;
} mxSmlEccErrorCount_t;
enum : unsigned { MXSML_DEVICE_UNAVAILABLE_REASON_SIZE = 64 };
typedef struct {
  int unavailableCode;  // 0: available
  char unavailableReason[MXSML_DEVICE_UNAVAILABLE_REASON_SIZE];
} mxSmlDeviceUnavailableReasonInfo_t;
typedef struct {
  float speed;  // GT/s
  unsigned int width;
} mxSmlPcieInfo_t;

#define HETPOOL_MXSML_REQUIRED(X)                                          \
  X(mxSmlInit, mxSmlReturn_t, (void))                                      \
  X(mxSmlGetDeviceCount, unsigned int, (void))                             \
  X(mxSmlGetErrorString, const char*, (mxSmlReturn_t))                     \
  X(mxSmlGetDeviceInfo, mxSmlReturn_t, (unsigned int, mxSmlDeviceInfo_t*)) \
  X(mxSmlGetMemoryInfo, mxSmlReturn_t, (unsigned int, mxSmlMemoryInfo_t*))

#define HETPOOL_MXSML_OPTIONAL(X)                                                                          \
  X(mxSmlGetMacaVersion, mxSmlReturn_t, (char*, unsigned int*))                                            \
  X(mxSmlGetDeviceIsaVersion, mxSmlReturn_t, (unsigned int, int*))                                         \
  X(mxSmlGetDeviceIpUsage, mxSmlReturn_t, (unsigned int, int, int*))                                       \
  X(mxSmlGetDeviceTopology, mxSmlReturn_t, (unsigned int, unsigned int, mxSmlDeviceTopologyLevel_t*))      \
  X(mxSmlGetMetaXLinkRemoteInfo, mxSmlReturn_t, (unsigned int, unsigned int, mxSmlMetaXLinkRemoteInfo_t*)) \
  X(mxSmlGetSingleGpuProcess, mxSmlReturn_t, (unsigned int, unsigned int*, mxSmlProcessInfo_t*))           \
  X(mxSmlGetTotalEccErrors, mxSmlReturn_t, (unsigned int, mxSmlEccErrorCount_t*))                          \
  X(mxSmlGetDeviceUnavailableReason, mxSmlReturn_t, (unsigned int, mxSmlDeviceUnavailableReasonInfo_t*))   \
  X(mxSmlGetPcieInfo, mxSmlReturn_t, (unsigned int, mxSmlPcieInfo_t*))                                     \
  X(mxSmlGetPcieMaxLinkInfo, mxSmlReturn_t, (unsigned int, mxSmlPcieInfo_t*))

HETPOOL_MXSML_REQUIRED(HETPOOL_DECLARE_ENTRY_POINT)
HETPOOL_MXSML_OPTIONAL(HETPOOL_DECLARE_ENTRY_POINT)

}  // extern "C"
