/* A stand-in for libcuda.so.1 (the CUDA driver API) over host memory, for tests on machines
 * without a GPU: what the test NVML library (fake_nvml.c) is to NVML. One device, "Fake CUDA GPU",
 * whose memory is $FAKE_CUDA_TOTAL_BYTES (default 16 GiB); every allocation family the memory
 * cap counts is here (cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged, cuMemAllocAsync, cuMemCreate,
 * cuArrayCreate, cuArray3DCreate and their frees), refused with CUDA_ERROR_OUT_OF_MEMORY past the
 * total, and cuGetProcAddress hands out the same entry points by their base names, as the real
 * driver does for the runtime. Device memory is reserved address space (mmap, MAP_NORESERVE):
 * a "2 GiB" allocation costs nothing until touched.
 * Build: cc -shared -fPIC -o libcuda.so.1 -Wl,-soname,libcuda.so.1 fake_cuda.c */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUarray;
typedef struct { size_t Width, Height; int Format; unsigned NumChannels; } CUDA_ARRAY_DESCRIPTOR;
typedef struct { size_t Width, Height, Depth; int Format; unsigned NumChannels, Flags; } CUDA_ARRAY3D_DESCRIPTOR;
typedef struct { char bytes[16]; } CUuuid;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NOT_FOUND 500

/* One allocation: its address (or handle) and size, in a list under one lock. */
struct block { uintptr_t addr; size_t size; int mapped; struct block *next; };
static struct block *blocks;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static size_t used;
static int initialised;
static int context_tag; /* the one context's address */
static __thread CUcontext current;

static size_t total_bytes(void) {
    const char *v = getenv("FAKE_CUDA_TOTAL_BYTES");
    return v && *v ? (size_t)strtoull(v, 0, 10) : (size_t)16 << 30;
}

static CUresult ready(void) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Reserves `size` bytes; `mapped` = 0 gives a bare handle (cuMemCreate, arrays). */
static CUresult take(uintptr_t *out, size_t size, int mapped) {
    CUresult r = ready();
    if (r) return r;
    if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (size > total_bytes() - used || used > total_bytes()) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct block *b = calloc(1, sizeof *b);
    void *p = mapped ? mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                     : malloc(1);
    if (!b || p == MAP_FAILED || !p) {
        free(b);
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *b = (struct block){(uintptr_t)p, size, mapped, blocks};
    blocks = b;
    used += size;
    *out = b->addr;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult give(uintptr_t addr) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&lock);
    for (struct block **at = &blocks; *at; at = &(*at)->next) {
        struct block *b = *at;
        if (b->addr != addr) continue;
        *at = b->next;
        used -= b->size;
        if (b->mapped) munmap((void *)b->addr, b->size);
        else free((void *)b->addr);
        free(b);
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuInit(unsigned flags) { (void)flags; initialised = 1; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int *v) { if (!v) return CUDA_ERROR_INVALID_VALUE; *v = 12040; return CUDA_SUCCESS; }

CUresult cuDeviceGetCount(int *n) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len < 1) return CUDA_ERROR_INVALID_VALUE;
    strncpy(name, "Fake CUDA GPU", (size_t)len - 1);
    name[len - 1] = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = total_bytes();
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    memset(u->bytes, 0x5a, sizeof u->bytes);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *v, int attribute, CUdevice d) {
    (void)attribute;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *v = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned flags, CUdevice d) {
    (void)flags;
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = current = &context_tag;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) { return cuCtxCreate_v2(ctx, 0, d); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return CUDA_SUCCESS; }
CUresult cuCtxDestroy_v2(CUcontext ctx) { if (ctx == current) current = 0; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext ctx) { current = ctx; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *ctx) { *ctx = current; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) {
    CUresult r = ready();
    if (r) return r;
    *d = 0;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    CUresult r = ready();
    if (r) return r;
    pthread_mutex_lock(&lock);
    *total = total_bytes();
    *free_bytes = *total > used ? *total - used : 0;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) { return take((uintptr_t *)p, size, 1); }
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned flags) { (void)flags; return take((uintptr_t *)p, size, 1); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream s) { (void)s; return take((uintptr_t *)p, size, 1); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    if (!pitch || elem == 0) return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + 511) / 512 * 512;
    return take((uintptr_t *)p, *pitch * height, 1);
}
CUresult cuMemFree_v2(CUdeviceptr p) { return give((uintptr_t)p); }
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return give((uintptr_t)p); }

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const void *prop, unsigned long long flags) {
    (void)prop; (void)flags;
    return take((uintptr_t *)h, size, 0);
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return give((uintptr_t)h); }

static size_t element_bytes(int format) {
    switch (format) {
    case 0x01: case 0x08: return 1;
    case 0x02: case 0x09: case 0x10: return 2;
    default: return 4;
    }
}
CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    size_t h = d->Height ? d->Height : 1;
    return take((uintptr_t *)a, d->Width * h * d->NumChannels * element_bytes(d->Format), 0);
}
CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    size_t h = d->Height ? d->Height : 1, depth = d->Depth ? d->Depth : 1;
    return take((uintptr_t *)a, d->Width * h * depth * d->NumChannels * element_bytes(d->Format), 0);
}
CUresult cuArrayDestroy(CUarray a) { return give((uintptr_t)a); }

/* The driver's table by base name, as the runtime asks for it ("cuMemAlloc", not "_v2"). */
static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)cuInit}, {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuDeviceGetCount", (void *)cuDeviceGetCount}, {"cuDeviceGet", (void *)cuDeviceGet},
    {"cuDeviceGetName", (void *)cuDeviceGetName}, {"cuDeviceTotalMem", (void *)cuDeviceTotalMem_v2},
    {"cuDeviceGetUuid", (void *)cuDeviceGetUuid}, {"cuDeviceGetAttribute", (void *)cuDeviceGetAttribute},
    {"cuCtxCreate", (void *)cuCtxCreate_v2}, {"cuCtxDestroy", (void *)cuCtxDestroy_v2},
    {"cuCtxSetCurrent", (void *)cuCtxSetCurrent}, {"cuCtxGetCurrent", (void *)cuCtxGetCurrent},
    {"cuCtxGetDevice", (void *)cuCtxGetDevice}, {"cuDevicePrimaryCtxRetain", (void *)cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", (void *)cuDevicePrimaryCtxRelease_v2},
    {"cuMemGetInfo", (void *)cuMemGetInfo_v2}, {"cuMemAlloc", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged}, {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemAllocPitch", (void *)cuMemAllocPitch_v2}, {"cuMemFree", (void *)cuMemFree_v2},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync}, {"cuMemCreate", (void *)cuMemCreate},
    {"cuMemRelease", (void *)cuMemRelease}, {"cuArrayCreate", (void *)cuArrayCreate_v2},
    {"cuArray3DCreate", (void *)cuArray3DCreate_v2}, {"cuArrayDestroy", (void *)cuArrayDestroy},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    (void)version; (void)flags;
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        *pfn = (void *)cuGetProcAddress_v2;
        if (status) *status = 0;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, symbol) == 0) {
            *pfn = table[i].fn;
            if (status) *status = 0;
            return CUDA_SUCCESS;
        }
    }
    *pfn = 0;
    if (status) *status = 1;
    return CUDA_ERROR_NOT_FOUND;
}
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
