// The subset of NVML's C ABI hetpool uses, declared here so the build needs no NVIDIA headers or
// libraries. Names, struct layouts and values follow nvml.h (r535+). The backend resolves these
// with dlsym; the fake library in tests/fakes implements the same declarations, so the compiler
// checks that both sides agree.
#pragma once

#include "drivers/dl/entry_points.h"

extern "C" {

typedef int nvmlReturn_t;
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];  // "%08X:%02X:%02X.0"
} nvmlPciInfo_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlProcessInfo_v2_t, which the _v3 process queries fill (nvml.h names it nvmlProcessInfo_t).
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE when it cannot tell
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef int nvmlEnableState_t;  // NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1

// Health: Xid critical-error events and the memory error counters.
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for nvmlEventTypeXidCriticalError (999: unknown)
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
typedef int nvmlMemoryErrorType_t;  // NVML_MEMORY_ERROR_TYPE_CORRECTED 0, _UNCORRECTED 1
typedef int nvmlEccCounterType_t;   // NVML_VOLATILE_ECC 0, NVML_AGGREGATE_ECC 1
enum : int { NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1, NVML_VOLATILE_ECC = 0 };
// nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3, DL_ECC_DATA 4.
enum : int { NVML_NVLINK_ERROR_DL_RECOVERY = 1 };
typedef int nvmlGpuTopologyLevel_t;
enum : int {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};
enum : unsigned {
  NVML_NVLINK_MAX_LINKS = 18,
  NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96,
  NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96,
  NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80
};

// X(name, return type, parameter list). Required: discovery cannot work without them.
#define HETPOOL_NVML_REQUIRED(X)                                                  \
  X(nvmlInit_v2, nvmlReturn_t, (void))                                            \
  X(nvmlShutdown, nvmlReturn_t, (void))                                           \
  X(nvmlErrorString, const char*, (nvmlReturn_t))                                 \
  X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int*))                         \
  X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t*))   \
  X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char*, unsigned int))         \
  X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char*, unsigned int))         \
  X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_t*))         \
  X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t*))        \
  X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t, int*, int*)) \
  X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char*, unsigned int))

// Optional: older drivers lack some; the backend fills the gap (sysfs) or leaves the field empty.
#define HETPOOL_NVML_OPTIONAL(X)                                                                              \
  X(nvmlDeviceGetNumaNodeId, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                                     \
  X(nvmlDeviceGetMinorNumber, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                                    \
  X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int*))                                                  \
  X(nvmlDeviceGetSerial, nvmlReturn_t, (nvmlDevice_t, char*, unsigned int))                                   \
  X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t, nvmlUtilization_t*))                          \
  X(nvmlDeviceGetTopologyCommonAncestor, nvmlReturn_t, (nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*)) \
  X(nvmlDeviceGetNvLinkState, nvmlReturn_t, (nvmlDevice_t, unsigned int, nvmlEnableState_t*))                 \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlReturn_t, (nvmlDevice_t, unsigned int, nvmlPciInfo_t*))          \
  X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t, (nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*)) \
  X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t*))                                                      \
  X(nvmlDeviceRegisterEvents, nvmlReturn_t, (nvmlDevice_t, unsigned long long, nvmlEventSet_t))               \
  X(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t*, unsigned int))                      \
  X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t))                                                         \
  X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                                                \
    (nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long*))                         \
  X(nvmlDeviceGetRemappedRows, nvmlReturn_t,                                                                  \
    (nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*, unsigned int*))                               \
  X(nvmlDeviceGetRetiredPagesPendingStatus, nvmlReturn_t, (nvmlDevice_t, nvmlEnableState_t*))                 \
  X(nvmlDeviceGetCurrPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                              \
  X(nvmlDeviceGetMaxPcieLinkWidth, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                               \
  X(nvmlDeviceGetCurrPcieLinkGeneration, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                         \
  X(nvmlDeviceGetMaxPcieLinkGeneration, nvmlReturn_t, (nvmlDevice_t, unsigned int*))                          \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlReturn_t, (nvmlDevice_t, unsigned long long*))             \
  X(nvmlDeviceGetNvLinkErrorCounter, nvmlReturn_t, (nvmlDevice_t, unsigned int, int, unsigned long long*))

HETPOOL_NVML_REQUIRED(HETPOOL_DECLARE_ENTRY_POINT)
HETPOOL_NVML_OPTIONAL(HETPOOL_DECLARE_ENTRY_POINT)

}  // extern "C"
