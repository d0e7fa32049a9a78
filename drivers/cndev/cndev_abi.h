// The subset of Cambricon CNDev's C ABI (libcndev.so) hetpool uses. Layouts follow cndev.h as
// shipped with Neuware / mlu-exporter (CNDEV_VERSION_6): versioned structs start with an int32
// API version the caller sets; the V2 structs have none.
#pragma once

#include <cstdint>

#include "drivers/dl/entry_points.h"

extern "C" {

typedef int cndevRet_t;
enum : int {
  CNDEV_SUCCESS = 0,
  CNDEV_ERROR_NO_DRIVER = 1,
  CNDEV_ERROR_UNINITIALIZED = 4,
  CNDEV_ERROR_INVALID_ARGUMENT = 5,
  CNDEV_ERROR_INVALID_DEVICE_ID = 6,
  CNDEV_ERROR_UNKNOWN = 7,
  CNDEV_ERROR_INSUFFICIENT_SPACE = 9,
  CNDEV_ERROR_NOT_SUPPORTED = 10,
  CNDEV_ERROR_INVALID_LINK = 11,
  CNDEV_ERROR_NO_DEVICES = 12,
  CNDEV_ERROR_IN_PROBLEM = 18,
};
enum : int { CNDEV_VERSION_6 = 6, CNDEV_UUID_SIZE = 37 };
typedef int32_t cndevDevice_t;

typedef struct {
  int32_t version;
  uint32_t number;
} cndevCardInfo_t;
typedef struct {
  int32_t version;
  uint8_t uuid[CNDEV_UUID_SIZE];
  uint64_t ncsUUID64;
} cndevUUID_t;
typedef struct {
  int64_t physicalMemoryTotal;  // MB
  int64_t physicalMemoryUsed;
  int64_t reservedMemory;
  int64_t virtualMemoryTotal;
  int64_t virtualMemoryUsed;
  uint64_t globalMemory;
  uint64_t reserved[16];
} cndevMemoryInfoV2_t;
// Pre-V2 layout (only the leading fields are read).
typedef struct {
  int32_t version;
  int64_t physicalMemoryTotal;  // MB
  int64_t physicalMemoryUsed;
  int64_t virtualMemoryTotal;
  int64_t virtualMemoryUsed;
  int64_t channelNumber;
  int64_t channelMemoryUsed[20];
} cndevMemoryInfo_t;
typedef struct {
  uint32_t subsystemId;
  uint32_t deviceId;
  uint16_t vendor;
  uint16_t subsystemVendor;
  uint32_t domain;
  uint32_t bus;
  uint32_t device;
  uint32_t function;
  uint16_t moduleId;
  uint16_t slotId;
  uint32_t reserved[8];
} cndevPCIeInfoV2_t;
typedef struct {
  int32_t version;
  uint32_t subsystemId;
  uint32_t deviceId;
  uint16_t vendor;
  uint16_t subsystemVendor;
  uint32_t domain;
  uint32_t bus;
  uint32_t device;
  uint32_t function;
  const char* physicalSlot;
  int32_t slotID;
} cndevPCIeInfo_t;
typedef struct {
  int32_t version;
  int32_t nodeId;
} cndevNUMANodeId_t;
typedef struct {
  int32_t version;
  uint32_t mcuMajorVersion, mcuMinorVersion, mcuBuildVersion;
  uint32_t driverMajorVersion, driverMinorVersion, driverBuildVersion;
} cndevVersionInfo_t;
// cndevTopologyRelationshipEnum_t: SELF 0, INTERNAL 1, SINGLE 2, MULTIPLE 3, HOST_BRIDGE 4, CPU 5, SYSTEM 6
typedef struct {
  int32_t version;
  int32_t relation;
} cndevTopologyRelationship_t;
typedef struct {
  int32_t macState;     // cndevMLULinkMACStateEnum_t: DOWN 0, UP 1, LLDP 2, READY 3
  int32_t serdesState;  // DISABLE 0, ENABLE 1, ONGOING 2
  int32_t presenceState;
  uint32_t serdesProgress;
  uint32_t reserved[7];
} cndevMLULinkStatusV2_t;
typedef struct {
  int32_t version;
  uint64_t mcSn;
  uint64_t baSn;
  uint32_t slotId;
  uint32_t portId;
  uint8_t devIp[16];
  uint8_t uuid[CNDEV_UUID_SIZE];
  uint32_t devIpVersion;
  uint32_t isIpValid;
  int32_t connectType;
  uint64_t ncsUUID64;
  uint8_t mac_addr[6];
  char port_name[256];
} cndevMLULinkRemoteInfo_t;
typedef struct {
  int32_t version;
  int32_t health;
  int32_t deviceState;
  int32_t driverState;
} cndevCardHealthState_t;
// Memory health (cndev.h, CNDEV_VERSION_6 layouts).
typedef struct {
  int32_t version;
  uint64_t oneBitError, multipleOneError, multipleError, multipleMultipleError;
  uint64_t correctedError, uncorrectedError, totalError, addressForbiddenError;
} cndevECCInfo_t;
typedef struct {
  int32_t version;
  uint32_t isPending;
  uint32_t isFailure;
} cndevRetiredPageStatus_t;
typedef struct {
  int32_t version;
  uint32_t correctRows, uncorrectRows, pendingRows, failedRows;
} cndevRemappedRow_t;
// One process holding the card; both figures in KiB. The caller sets version in the first element.
typedef struct {
  int32_t version;
  uint32_t pid;
  uint64_t physicalMemoryUsed;
  uint64_t virtualMemoryUsed;
} cndevProcessInfo_t;

#define HETPOOL_CNDEV_REQUIRED(X)                                   \
  X(cndevInit, cndevRet_t, (int))                                   \
  X(cndevRelease, cndevRet_t, (void))                               \
  X(cndevGetErrorString, const char*, (cndevRet_t))                 \
  X(cndevGetDeviceCount, cndevRet_t, (cndevCardInfo_t*))            \
  X(cndevGetDeviceHandleByIndex, cndevRet_t, (int, cndevDevice_t*)) \
  X(cndevGetUUID, cndevRet_t, (cndevUUID_t*, cndevDevice_t))        \
  X(cndevGetCardNameStringByDevId, const char*, (cndevDevice_t))

// Memory and PCIe each need one of a V2 / pre-V2 pair (checked at load); the rest are optional.
#define HETPOOL_CNDEV_OPTIONAL(X)                                                                           \
  X(cndevGetMemoryUsageV2, cndevRet_t, (cndevMemoryInfoV2_t*, cndevDevice_t))                               \
  X(cndevGetMemoryUsage, cndevRet_t, (cndevMemoryInfo_t*, cndevDevice_t))                                   \
  X(cndevGetPCIeInfoV2, cndevRet_t, (cndevPCIeInfoV2_t*, cndevDevice_t))                                    \
  X(cndevGetPCIeInfo, cndevRet_t, (cndevPCIeInfo_t*, cndevDevice_t))                                        \
  X(cndevGetNUMANodeIdByDevId, cndevRet_t, (cndevNUMANodeId_t*, cndevDevice_t))                             \
  X(cndevGetComputeCapability, cndevRet_t, (unsigned int*, unsigned int*, cndevDevice_t))                   \
  X(cndevGetVersionInfo, cndevRet_t, (cndevVersionInfo_t*, cndevDevice_t))                                  \
  X(cndevGetCardHealthState, cndevRet_t, (cndevCardHealthState_t*, cndevDevice_t))                          \
  X(cndevTopologyGetRelationship, cndevRet_t, (cndevTopologyRelationship_t*, cndevDevice_t, cndevDevice_t)) \
  X(cndevGetMLULinkPortNumber, int, (cndevDevice_t))                                                        \
  X(cndevGetMLULinkStatusV2, cndevRet_t, (cndevMLULinkStatusV2_t*, cndevDevice_t, int))                     \
  X(cndevGetMLULinkRemoteInfo, cndevRet_t, (cndevMLULinkRemoteInfo_t*, cndevDevice_t, int))                 \
  X(cndevGetProcessInfo, cndevRet_t, (unsigned*, cndevProcessInfo_t*, cndevDevice_t))                       \
  X(cndevGetECCInfo, cndevRet_t, (cndevECCInfo_t*, cndevDevice_t))                                          \
  X(cndevGetRetiredPagesStatus, cndevRet_t, (cndevRetiredPageStatus_t*, cndevDevice_t))                     \
  X(cndevGetRemappedRows, cndevRet_t, (cndevRemappedRow_t*, cndevDevice_t))

HETPOOL_CNDEV_REQUIRED(HETPOOL_DECLARE_ENTRY_POINT)
HETPOOL_CNDEV_OPTIONAL(HETPOOL_DECLARE_ENTRY_POINT)

}  // extern "C"
