/* Cohort's GPU memory cap: a CUDA driver-API interposer preloaded (/etc/ld.so.preload) into every
 * process of a container that shares a GPU, so one student cannot take a whole card's memory.
 *
 * What it does: every allocation a process makes through libcuda (cuMemAlloc, cuMemAllocPitch,
 * cuMemAllocManaged, cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemCreate, cuArrayCreate,
 * cuArray3DCreate) is counted per device and refused with CUDA_ERROR_OUT_OF_MEMORY once the
 * process would go past the cap; the matching frees give the room back; cuMemGetInfo reports the
 * cap as the total and what is left under it as free. The CUDA runtime (and so PyTorch) does not
 * call libcuda's exported symbols: it opens libcuda with dlopen, looks up cuGetProcAddress with
 * dlsym and takes every entry point from it. So dlsym and cuGetProcAddress are interposed too,
 * and hand out the counting entry points in place of the driver's. The pre-3.2 (32-bit size)
 * allocation entry points are refused outright rather than counted.
 *
 * The cap: `limit_bytes=N` in /etc/cohort/cuda-cap.conf, written by Cohort's agent (root-owned,
 * not writable by others; any other owner, mode or content is refused: every allocation fails),
 * lowered further (never raised) by $COHORT_CUDA_CAP_BYTES, which is how a test or
 * scripts/gpu-check sets a cap on a host with no file. Neither: no cap, everything passes through.
 *
 * What it does not stop: a program that reaches the GPU without libcuda (its own ioctls on
 * /dev/nvidia*), memory the driver takes for a context itself, and several processes of one
 * container each using up to the cap. See docs/gpus.md.
 *
 * Build: cc -shared -fPIC -O2 -o libcohort_cuda_cap.so cuda_cap.c -ldl -lpthread */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_PATH "/etc/cohort/cuda-cap.conf"
#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_SUPPORTED 801
#define PER_THREAD_DEFAULT_STREAM 2ULL /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
#define MAX_DEVICES 64

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUhandle; /* CUmemGenericAllocationHandle */
typedef void *CUstream;
typedef void *CUarray;
typedef struct { size_t Width, Height; int Format; unsigned NumChannels; } ArrayDesc;
typedef struct { size_t Width, Height, Depth; int Format; unsigned NumChannels, Flags; } Array3DDesc;

/* ---- the cap ---- */

static pthread_once_t cap_once = PTHREAD_ONCE_INIT;
static unsigned long long cap = ~0ULL; /* ~0: no cap */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long used[MAX_DEVICES];

/* The file's cap; 0 when it is there but not as the agent writes it (fail closed). */
static unsigned long long file_cap(void) {
    struct stat st;
    if (lstat(CONFIG_PATH, &st) != 0) return ~0ULL;
    if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) return 0;
    FILE *f = fopen(CONFIG_PATH, "re");
    if (!f) return 0;
    char line[128];
    unsigned long long limit = 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char *end;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (strncmp(line, "limit_bytes=", 12) != 0) { found = 0; break; }
        limit = strtoull(line + 12, &end, 10);
        found = end != line + 12 && (*end == '\n' || *end == 0);
        if (!found) break;
    }
    fclose(f);
    return found ? limit : 0;
}

static void read_cap(void) {
    cap = file_cap();
    const char *env = getenv("COHORT_CUDA_CAP_BYTES");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end == 0 && v < cap) cap = v;
    }
}

static unsigned long long the_cap(void) {
    pthread_once(&cap_once, read_cap);
    return cap;
}

/* ---- the driver's own entry points ---- */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_fn;

static void *real_dlsym(void *handle, const char *name) {
    if (!real_dlsym_fn) {
        real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!real_dlsym_fn) real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!real_dlsym_fn) return NULL;
    }
    return real_dlsym_fn(handle, name);
}

/* The driver's `name`: from the libcuda the program linked, or opened now. */
static void *driver(const char *name) {
    void *fn = real_dlsym(RTLD_NEXT, name);
    if (fn) return fn;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    return lib ? real_dlsym(lib, name) : NULL;
}

#define NEXT(type, name)                                                       \
    static type next_##name;                                                   \
    if (!next_##name) next_##name = (type)driver(#name);                       \
    if (!next_##name) return CUDA_ERROR_NOT_SUPPORTED;

/* ---- what is allocated: kind and address/handle -> device and size ---- */

enum kind { POINTER, HANDLE, ARRAY };
struct block { enum kind kind; uintptr_t key; int device; unsigned long long size; struct block *next; };
#define BUCKETS 1024
static struct block *buckets[BUCKETS];

static unsigned bucket(enum kind kind, uintptr_t key) { return (unsigned)((key >> 4) ^ (key >> 20) ^ kind) % BUCKETS; }

static int current_device(void) {
    typedef CUresult (*fn)(int *);
    static fn get;
    if (!get) get = (fn)driver("cuCtxGetDevice");
    int d = 0;
    if (!get || get(&d) != CUDA_SUCCESS || d < 0 || d >= MAX_DEVICES) d = 0;
    return d;
}

/* Holds `size` bytes on the current device; 0 when that would pass the cap. */
static int reserve(int device, unsigned long long size) {
    unsigned long long limit = the_cap();
    pthread_mutex_lock(&lock);
    int ok = size <= limit && used[device] <= limit - size;
    if (ok) used[device] += size;
    pthread_mutex_unlock(&lock);
    return ok;
}

static void unreserve(int device, unsigned long long size) {
    pthread_mutex_lock(&lock);
    used[device] -= size;
    pthread_mutex_unlock(&lock);
}

/* After the driver allocated what `reserve` held: remember it, or give the room back. */
static CUresult settle(CUresult r, enum kind kind, uintptr_t key, int device, unsigned long long size) {
    if (r != CUDA_SUCCESS) {
        unreserve(device, size);
        return r;
    }
    struct block *b = malloc(sizeof *b);
    if (!b) return r; /* counted, never given back: errs on the safe side */
    *b = (struct block){kind, key, device, size, NULL};
    pthread_mutex_lock(&lock);
    unsigned i = bucket(kind, key);
    b->next = buckets[i];
    buckets[i] = b;
    pthread_mutex_unlock(&lock);
    return r;
}

/* After the driver freed `key`: its room is free again. */
static CUresult forget(CUresult r, enum kind kind, uintptr_t key) {
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    for (struct block **at = &buckets[bucket(kind, key)]; *at; at = &(*at)->next) {
        struct block *b = *at;
        if (b->kind != kind || b->key != key) continue;
        *at = b->next;
        used[b->device] -= b->size;
        free(b);
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

#define ALLOCATE(kind, out, size, call)                                        \
    do {                                                                       \
        int dev_ = current_device();                                           \
        unsigned long long size_ = (size);                                     \
        if (!reserve(dev_, size_)) return CUDA_ERROR_OUT_OF_MEMORY;            \
        CUresult r_ = (call);                                                  \
        return settle(r_, kind, r_ == CUDA_SUCCESS ? (uintptr_t) * (out) : 0, dev_, size_); \
    } while (0)

/* ---- the counting entry points ---- */

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t);
    NEXT(fn, cuMemAlloc_v2);
    ALLOCATE(POINTER, p, size, next_cuMemAlloc_v2(p, size));
}

CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned flags) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t, unsigned);
    NEXT(fn, cuMemAllocManaged);
    ALLOCATE(POINTER, p, size, next_cuMemAllocManaged(p, size, flags));
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned elem) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    NEXT(fn, cuMemAllocPitch_v2);
    /* The pitch is the driver's choice (width rounded up to its alignment, at most 512 bytes
     * on current cards): hold the most it can be, then settle on what it chose. */
    int dev = current_device();
    unsigned long long most = (unsigned long long)(width + 512) * height;
    if (!reserve(dev, most)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = next_cuMemAllocPitch_v2(p, pitch, width, height, elem);
    if (r != CUDA_SUCCESS) return settle(r, POINTER, 0, dev, most);
    unsigned long long size = (unsigned long long)*pitch * height;
    if (size < most) unreserve(dev, most - size);
    else if (size > most && !reserve(dev, size - most)) {
        typedef CUresult (*free_fn)(CUdeviceptr);
        free_fn release = (free_fn)driver("cuMemFree_v2");
        if (release) release(*p);
        unreserve(dev, most);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return settle(r, POINTER, (uintptr_t)*p, dev, size);
}

CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t, CUstream);
    NEXT(fn, cuMemAllocAsync);
    ALLOCATE(POINTER, p, size, next_cuMemAllocAsync(p, size, s));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t, CUstream);
    NEXT(fn, cuMemAllocAsync_ptsz);
    ALLOCATE(POINTER, p, size, next_cuMemAllocAsync_ptsz(p, size, s));
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, void *pool, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t, void *, CUstream);
    NEXT(fn, cuMemAllocFromPoolAsync);
    ALLOCATE(POINTER, p, size, next_cuMemAllocFromPoolAsync(p, size, pool, s));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, void *pool, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr *, size_t, void *, CUstream);
    NEXT(fn, cuMemAllocFromPoolAsync_ptsz);
    ALLOCATE(POINTER, p, size, next_cuMemAllocFromPoolAsync_ptsz(p, size, pool, s));
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    typedef CUresult (*fn)(CUdeviceptr);
    NEXT(fn, cuMemFree_v2);
    return forget(next_cuMemFree_v2(p), POINTER, (uintptr_t)p);
}

CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr, CUstream);
    NEXT(fn, cuMemFreeAsync);
    return forget(next_cuMemFreeAsync(p, s), POINTER, (uintptr_t)p);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
    typedef CUresult (*fn)(CUdeviceptr, CUstream);
    NEXT(fn, cuMemFreeAsync_ptsz);
    return forget(next_cuMemFreeAsync_ptsz(p, s), POINTER, (uintptr_t)p);
}

CUresult cuMemCreate(CUhandle *h, size_t size, const void *prop, unsigned long long flags) {
    typedef CUresult (*fn)(CUhandle *, size_t, const void *, unsigned long long);
    NEXT(fn, cuMemCreate);
    ALLOCATE(HANDLE, h, size, next_cuMemCreate(h, size, prop, flags));
}

CUresult cuMemRelease(CUhandle h) {
    typedef CUresult (*fn)(CUhandle);
    NEXT(fn, cuMemRelease);
    return forget(next_cuMemRelease(h), HANDLE, (uintptr_t)h);
}

/* An array's bytes: elements times channels times the format's size (the compressed and
 * exotic formats counted at 4 bytes an element, more than most of them take). */
static unsigned long long array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels) {
    unsigned long long elem = (format == 0x01 || format == 0x08) ? 1 : (format == 0x02 || format == 0x09 || format == 0x10) ? 2 : 4;
    return (unsigned long long)w * (h ? h : 1) * (d ? d : 1) * channels * elem;
}

CUresult cuArrayCreate_v2(CUarray *a, const ArrayDesc *d) {
    typedef CUresult (*fn)(CUarray *, const ArrayDesc *);
    NEXT(fn, cuArrayCreate_v2);
    if (!d) return next_cuArrayCreate_v2(a, d);
    ALLOCATE(ARRAY, a, array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), next_cuArrayCreate_v2(a, d));
}

CUresult cuArray3DCreate_v2(CUarray *a, const Array3DDesc *d) {
    typedef CUresult (*fn)(CUarray *, const Array3DDesc *);
    NEXT(fn, cuArray3DCreate_v2);
    if (!d) return next_cuArray3DCreate_v2(a, d);
    ALLOCATE(ARRAY, a, array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels),
             next_cuArray3DCreate_v2(a, d));
}

CUresult cuArrayDestroy(CUarray a) {
    typedef CUresult (*fn)(CUarray);
    NEXT(fn, cuArrayDestroy);
    return forget(next_cuArrayDestroy(a), ARRAY, (uintptr_t)a);
}

/* The pre-3.2 entry points (32-bit sizes): refused, not counted. */
CUresult cuMemAlloc(unsigned *p, unsigned size) { (void)p; (void)size; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuMemAllocPitch(unsigned *p, unsigned *pitch, unsigned w, unsigned h, unsigned e) {
    (void)p; (void)pitch; (void)w; (void)h; (void)e;
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuArrayCreate(CUarray *a, const void *d) { (void)a; (void)d; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuArray3DCreate(CUarray *a, const void *d) { (void)a; (void)d; return CUDA_ERROR_NOT_SUPPORTED; }

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    typedef CUresult (*fn)(size_t *, size_t *);
    NEXT(fn, cuMemGetInfo_v2);
    CUresult r = next_cuMemGetInfo_v2(free_bytes, total);
    unsigned long long limit = the_cap();
    if (r != CUDA_SUCCESS || !free_bytes || !total || limit == ~0ULL) return r;
    int dev = current_device();
    pthread_mutex_lock(&lock);
    unsigned long long left = used[dev] < limit ? limit - used[dev] : 0;
    pthread_mutex_unlock(&lock);
    if (*total > limit) *total = (size_t)limit;
    if (*free_bytes > left) *free_bytes = (size_t)left;
    return r;
}
CUresult cuMemGetInfo(unsigned *free_bytes, unsigned *total) { (void)free_bytes; (void)total; return CUDA_ERROR_NOT_SUPPORTED; }

/* ---- handing the counting entry points out ---- */

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status);

/* By the base name cuGetProcAddress is asked for, and the exported names dlsym is asked for. */
static const struct entry {
    const char *base, *exported, *ptsz;
    void *fn, *ptsz_fn;
} entries[] = {
    {"cuMemAlloc", "cuMemAlloc_v2", 0, (void *)cuMemAlloc_v2, 0},
    {"cuMemAllocManaged", "cuMemAllocManaged", 0, (void *)cuMemAllocManaged, 0},
    {"cuMemAllocPitch", "cuMemAllocPitch_v2", 0, (void *)cuMemAllocPitch_v2, 0},
    {"cuMemAllocAsync", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
     (void *)cuMemAllocFromPoolAsync, (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFree", "cuMemFree_v2", 0, (void *)cuMemFree_v2, 0},
    {"cuMemFreeAsync", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", "cuMemCreate", 0, (void *)cuMemCreate, 0},
    {"cuMemRelease", "cuMemRelease", 0, (void *)cuMemRelease, 0},
    {"cuArrayCreate", "cuArrayCreate_v2", 0, (void *)cuArrayCreate_v2, 0},
    {"cuArray3DCreate", "cuArray3DCreate_v2", 0, (void *)cuArray3DCreate_v2, 0},
    {"cuArrayDestroy", "cuArrayDestroy", 0, (void *)cuArrayDestroy, 0},
    {"cuMemGetInfo", "cuMemGetInfo_v2", 0, (void *)cuMemGetInfo_v2, 0},
    {0, "cuMemAlloc", 0, (void *)cuMemAlloc, 0},
    {0, "cuMemAllocPitch", 0, (void *)cuMemAllocPitch, 0},
    {0, "cuArrayCreate", 0, (void *)cuArrayCreate, 0},
    {0, "cuArray3DCreate", 0, (void *)cuArray3DCreate, 0},
    {0, "cuMemGetInfo", 0, (void *)cuMemGetInfo, 0},
    {0, "cuGetProcAddress", 0, (void *)cuGetProcAddress, 0},
    {0, "cuGetProcAddress_v2", 0, (void *)cuGetProcAddress_v2, 0},
};
#define ENTRIES (sizeof entries / sizeof entries[0])

/* What the driver handed out for `symbol` becomes the counting one where there is one. */
static void substitute(const char *symbol, void **pfn, int version, unsigned long long flags) {
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        /* The driver picks the ABI by version; answer with the wrapper of the same ABI. */
        if (*pfn == driver("cuGetProcAddress_v2")) *pfn = (void *)cuGetProcAddress_v2;
        else if (*pfn == driver("cuGetProcAddress")) *pfn = (void *)cuGetProcAddress;
        return;
    }
    for (size_t i = 0; i < ENTRIES; i++) {
        if (!entries[i].base || strcmp(entries[i].base, symbol) != 0) continue;
        if (version < 3020) *pfn = NULL; /* the 32-bit ABI: refused */
        else if (entries[i].ptsz && (flags & PER_THREAD_DEFAULT_STREAM)) *pfn = entries[i].ptsz_fn;
        else *pfn = entries[i].fn;
        return;
    }
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags) {
    typedef CUresult (*fn)(const char *, void **, int, unsigned long long);
    NEXT(fn, cuGetProcAddress);
    CUresult r = next_cuGetProcAddress(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) substitute(symbol, pfn, version, flags);
    return r;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    typedef CUresult (*fn)(const char *, void **, int, unsigned long long, int *);
    NEXT(fn, cuGetProcAddress_v2);
    CUresult r = next_cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && symbol && pfn && *pfn) substitute(symbol, pfn, version, flags);
    return r;
}

/* dlsym: the driver's entry points asked for by name come back as the counting ones. A lookup
 * with RTLD_NEXT is answered relative to its caller, as glibc would (walking the objects loaded
 * after the caller), since forwarding it would make it relative to this library. */
static void *next_after(const void *caller, const char *name) {
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return NULL;
    for (map = map->l_next; map; map = map->l_next) {
        if (!map->l_name || !map->l_name[0]) continue;
        void *h = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) continue;
        void *fn = real_dlsym(h, name);
        dlclose(h);
        if (fn) return fn;
    }
    return NULL;
}

void *dlsym(void *handle, const char *name) {
    void *fn = handle == RTLD_NEXT ? next_after(__builtin_return_address(0), name) : real_dlsym(handle, name);
    if (!fn || name[0] != 'c' || name[1] != 'u') return fn;
    for (size_t i = 0; i < ENTRIES; i++) {
        if (strcmp(entries[i].exported, name) == 0) return entries[i].fn;
        if (entries[i].ptsz && strcmp(entries[i].ptsz, name) == 0) return entries[i].ptsz_fn;
    }
    return fn;
}
