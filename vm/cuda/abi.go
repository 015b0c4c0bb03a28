package cuda

// The ABI of the driver API as cuda.h (CUDA 12.6) declares it (the primary-context calls
// checked against CUDA 13.0's, through cudarc's CUDA 13000 bindings): struct layouts, enum values
// and the versioned symbol names the header's macros expand to. Written from the header,
// not generated; TestABILayout checks the structs against a C compiler's layout of the
// same declarations.

// memLocation is CUmemLocation.
type memLocation struct {
	typ int32 // CUmemLocationType
	id  int32
}

// memAllocationProp is CUmemAllocationProp (CUmemAllocationProp_v1): 32 bytes on 64-bit
// hosts, win32HandleMetaData at offset 16, allocFlags at 24.
type memAllocationProp struct {
	typ                  int32 // CUmemAllocationType
	requestedHandleTypes int32 // CUmemAllocationHandleType
	location             memLocation
	win32HandleMetaData  uintptr
	compressionType      uint8 // allocFlags
	gpuDirectRDMACapable uint8
	usage                uint16
	reserved             [4]uint8
}

// memAccessDesc is CUmemAccessDesc: 12 bytes.
type memAccessDesc struct {
	location memLocation
	flags    int32 // CUmemAccess_flags
}

const (
	memAllocationTypePinned     = 0x1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memLocationTypeDevice       = 0x1 // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessFlagsProtReadWrite = 0x3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	memAllocGranularityMinimum  = 0x0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM

	ctxSchedBlockingSync = 0x04 // CU_CTX_SCHED_BLOCKING_SYNC
	streamNonBlocking    = 0x1  // CU_STREAM_NON_BLOCKING
	eventDisableTiming   = 0x2  // CU_EVENT_DISABLE_TIMING
	memHostAllocPortable = 0x01 // CU_MEMHOSTALLOC_PORTABLE

	// CUdevice_attribute values.
	attrMultiprocessorCount = 16
	attrAsyncEngineCount    = 40
	attrUnifiedAddressing   = 41
	attrComputeMajor        = 75
	attrComputeMinor        = 76
	attrVMMSupported        = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
)

// MinDriverVersion is the oldest driver this package runs on, as cuDriverGetVersion
// reports it (1000*major + 10*minor): CUDA 11.0, the first with cuDevicePrimaryCtxRelease_v2
// and cuDevicePrimaryCtxSetFlags_v2 (the latter may set the flags of a primary context
// already active, where the older one fails), which cuda.h's macros name in every release
// since, CUDA 13 included; the virtual memory management API (cuMemCreate, cuMemMap, ...)
// and its CUmemAllocationProp layout came with CUDA 10.2.
const MinDriverVersion = 11000

// fn names a bound driver function.
type fn int

const (
	fnInit fn = iota
	fnDriverGetVersion
	fnGetErrorName
	fnGetErrorString
	fnDeviceGetCount
	fnDeviceGet
	fnDeviceGetName
	fnDeviceTotalMem
	fnDeviceGetAttribute
	fnCtxCreate
	fnCtxDestroy
	fnDevicePrimaryCtxRetain
	fnDevicePrimaryCtxRelease
	fnDevicePrimaryCtxSetFlags
	fnCtxSetCurrent
	fnCtxSynchronize
	fnMemGetInfo
	fnMemAlloc
	fnMemFree
	fnMemHostAlloc
	fnMemFreeHost
	fnMemcpyHtoD
	fnMemcpyDtoH
	fnMemcpyHtoDAsync
	fnMemcpyDtoHAsync
	fnMemGetAllocationGranularity
	fnMemCreate
	fnMemRelease
	fnMemAddressReserve
	fnMemAddressFree
	fnMemMap
	fnMemSetAccess
	fnMemUnmap
	fnStreamCreate
	fnStreamDestroy
	fnStreamWaitEvent
	fnStreamSynchronize
	fnEventCreate
	fnEventDestroy
	fnEventRecord
	fnEventQuery
	fnEventSynchronize
	fnEventElapsedTime
	fnModuleLoadData
	fnModuleUnload
	fnModuleGetFunction
	fnLaunchKernel
	numFns
)

// symbols are the ABI names: what cuda.h's #defines turn cuCtxCreate, cuMemAlloc, ... into.
// Binding the unversioned names would get the legacy 32-bit entry points.
var symbols = [numFns]string{
	fnInit:                        "cuInit",
	fnDriverGetVersion:            "cuDriverGetVersion",
	fnGetErrorName:                "cuGetErrorName",
	fnGetErrorString:              "cuGetErrorString",
	fnDeviceGetCount:              "cuDeviceGetCount",
	fnDeviceGet:                   "cuDeviceGet",
	fnDeviceGetName:               "cuDeviceGetName",
	fnDeviceTotalMem:              "cuDeviceTotalMem_v2",
	fnDeviceGetAttribute:          "cuDeviceGetAttribute",
	fnCtxCreate:                   "cuCtxCreate_v2",
	fnCtxDestroy:                  "cuCtxDestroy_v2",
	fnDevicePrimaryCtxRetain:      "cuDevicePrimaryCtxRetain",
	fnDevicePrimaryCtxRelease:     "cuDevicePrimaryCtxRelease_v2",
	fnDevicePrimaryCtxSetFlags:    "cuDevicePrimaryCtxSetFlags_v2",
	fnCtxSetCurrent:               "cuCtxSetCurrent",
	fnCtxSynchronize:              "cuCtxSynchronize",
	fnMemGetInfo:                  "cuMemGetInfo_v2",
	fnMemAlloc:                    "cuMemAlloc_v2",
	fnMemFree:                     "cuMemFree_v2",
	fnMemHostAlloc:                "cuMemHostAlloc",
	fnMemFreeHost:                 "cuMemFreeHost",
	fnMemcpyHtoD:                  "cuMemcpyHtoD_v2",
	fnMemcpyDtoH:                  "cuMemcpyDtoH_v2",
	fnMemcpyHtoDAsync:             "cuMemcpyHtoDAsync_v2",
	fnMemcpyDtoHAsync:             "cuMemcpyDtoHAsync_v2",
	fnMemGetAllocationGranularity: "cuMemGetAllocationGranularity",
	fnMemCreate:                   "cuMemCreate",
	fnMemRelease:                  "cuMemRelease",
	fnMemAddressReserve:           "cuMemAddressReserve",
	fnMemAddressFree:              "cuMemAddressFree",
	fnMemMap:                      "cuMemMap",
	fnMemSetAccess:                "cuMemSetAccess",
	fnMemUnmap:                    "cuMemUnmap",
	fnStreamCreate:                "cuStreamCreate",
	fnStreamDestroy:               "cuStreamDestroy_v2",
	fnStreamWaitEvent:             "cuStreamWaitEvent",
	fnStreamSynchronize:           "cuStreamSynchronize",
	fnEventCreate:                 "cuEventCreate",
	fnEventDestroy:                "cuEventDestroy_v2",
	fnEventRecord:                 "cuEventRecord",
	fnEventQuery:                  "cuEventQuery",
	fnEventSynchronize:            "cuEventSynchronize",
	fnEventElapsedTime:            "cuEventElapsedTime",
	fnModuleLoadData:              "cuModuleLoadData",
	fnModuleUnload:                "cuModuleUnload",
	fnModuleGetFunction:           "cuModuleGetFunction",
	fnLaunchKernel:                "cuLaunchKernel",
}

// vmmFns are the virtual memory management calls: a driver may lack them (then the
// device has no VA allocator) without being unusable.
var vmmFns = []fn{fnMemGetAllocationGranularity, fnMemCreate, fnMemRelease, fnMemAddressReserve,
	fnMemAddressFree, fnMemMap, fnMemSetAccess, fnMemUnmap}
