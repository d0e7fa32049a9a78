// Level Zero entry points hetpool uses. Types come from Debian's libze-dev headers (spec 1.4);
// nothing is linked: the loader (libze_loader.so.1) is opened at run time. Spec 1.4 reaches
// Sysman through zeInit with ZES_ENABLE_SYSMAN=1 and the core device handles; newer loaders also
// export zesInit/zesDriverGet/zesDeviceGet, which are preferred when present.
#pragma once

#include <level_zero/ze_api.h>
#include <level_zero/zes_api.h>

#include "drivers/dl/entry_points.h"

extern "C" {
// Spec 1.5+ Sysman-only initialisation (not in the 1.4 headers, so declared here).
typedef void* hetpool_zes_driver_handle_t;
ze_result_t zesInit(uint32_t flags);
ze_result_t zesDriverGet(uint32_t* count, hetpool_zes_driver_handle_t* drivers);
ze_result_t zesDeviceGet(hetpool_zes_driver_handle_t driver, uint32_t* count, zes_device_handle_t* devices);
}

#define HETPOOL_L0_REQUIRED(X)                                                                    \
  X(zeInit, ze_result_t, (ze_init_flags_t))                                                       \
  X(zeDriverGet, ze_result_t, (uint32_t*, ze_driver_handle_t*))                                   \
  X(zeDeviceGet, ze_result_t, (ze_driver_handle_t, uint32_t*, ze_device_handle_t*))               \
  X(zesDeviceGetProperties, ze_result_t, (zes_device_handle_t, zes_device_properties_t*))         \
  X(zesDeviceEnumMemoryModules, ze_result_t, (zes_device_handle_t, uint32_t*, zes_mem_handle_t*)) \
  X(zesMemoryGetState, ze_result_t, (zes_mem_handle_t, zes_mem_state_t*))                         \
  X(zesDevicePciGetProperties, ze_result_t, (zes_device_handle_t, zes_pci_properties_t*))

#define HETPOOL_L0_OPTIONAL(X)                                                                          \
  X(zesInit, ze_result_t, (uint32_t))                                                                   \
  X(zesDriverGet, ze_result_t, (uint32_t*, hetpool_zes_driver_handle_t*))                               \
  X(zesDeviceGet, ze_result_t, (hetpool_zes_driver_handle_t, uint32_t*, zes_device_handle_t*))          \
  X(zesDeviceEnumFabricPorts, ze_result_t, (zes_device_handle_t, uint32_t*, zes_fabric_port_handle_t*)) \
  X(zesFabricPortGetProperties, ze_result_t, (zes_fabric_port_handle_t, zes_fabric_port_properties_t*)) \
  X(zesFabricPortGetState, ze_result_t, (zes_fabric_port_handle_t, zes_fabric_port_state_t*))           \
  X(zesDeviceProcessesGetState, ze_result_t, (zes_device_handle_t, uint32_t*, zes_process_state_t*))    \
  X(zesDeviceGetState, ze_result_t, (zes_device_handle_t, zes_device_state_t*))                         \
  X(zesDeviceEnumRasErrorSets, ze_result_t, (zes_device_handle_t, uint32_t*, zes_ras_handle_t*))        \
  X(zesRasGetProperties, ze_result_t, (zes_ras_handle_t, zes_ras_properties_t*))                        \
  X(zesRasGetState, ze_result_t, (zes_ras_handle_t, ze_bool_t, zes_ras_state_t*))                       \
  X(zesDevicePciGetState, ze_result_t, (zes_device_handle_t, zes_pci_state_t*))
