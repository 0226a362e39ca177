/* Cohort's GPU memory cap: a CUDA driver-API interposer preloaded (/etc/ld.so.preload) into every
 * process of a container that shares a GPU, so one student cannot take a whole card's memory.
 *
 * What it does: every allocation a process makes through libcuda (cuMemAlloc, cuMemAllocPitch,
 * cuMemAllocManaged, cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemCreate, cuArrayCreate,
 * cuArray3DCreate) is counted per device and refused with CUDA_ERROR_OUT_OF_MEMORY once the
 * container (all its processes together) would go past the cap; the matching frees give the room
 * back; cuMemGetInfo reports the cap as the total and what the container has left under it as
 * free. The CUDA runtime (and so PyTorch) does not call libcuda's exported symbols: it opens
 * libcuda with dlopen, looks up cuGetProcAddress with dlsym and takes every entry point from it.
 * So dlsym and cuGetProcAddress are interposed too, and hand out the counting entry points in
 * place of the driver's. The pre-3.2 (32-bit size) allocation entry points are refused outright
 * rather than counted.
 *
 * The cap: `limit_bytes=N` in /etc/cohort/cuda-cap.conf, written by Cohort's agent (root-owned,
 * not writable by others; any other owner, mode or content is refused: every allocation fails),
 * lowered further (never raised) for one process by $COHORT_CUDA_CAP_BYTES, which is how a test
 * or scripts/gpu-check sets a cap on a host with no file. Neither: no cap, everything passes.
 *
 * One cap for the whole container: the ledger. The container's processes share the cap through
 * the kernel's file locks, not through memory they could write: /etc/cohort/cuda-cap.ledger
 * (root-owned, in a root-owned directory, empty) stands for the cap, one byte offset per MiB of
 * each device's cap, and a process holds an open-file-description (OFD) write lock on as many of
 * those offsets as it has MiB allocated (rounded up). Locks of different processes never
 * overlap, so together they never pass the cap; the kernel drops a process's locks when it dies,
 * however it dies, so a killed process's room comes back with no clean-up; and nothing written
 * into the file changes anything (its content is never read). The file is writable by everyone
 * only because a write lock needs a descriptor open for writing. What a student can do with it
 * is take locks of their own (or hold the guard offset), which only takes room from their own
 * container: they deny themselves, never pass the cap. When the cap comes from the file, a
 * missing or foreign ledger fails closed (every allocation refused). With only
 * $COHORT_CUDA_CAP_BYTES and no ledger, the cap is the process's own.
 *
 * What it does not stop: a program that reaches the GPU without libcuda (its own ioctls on
 * /dev/nvidia*, or code in the process that closes the library's descriptor), and memory the
 * driver takes for a context itself. See docs/gpus.md.
 *
 * Build: cc -shared -fPIC -O2 -o libcohort_cuda_cap.so cuda_cap.c -ldl -lpthread */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef CAP_DIR
#define CAP_DIR "/etc/cohort" /* another only in a build for a test on a host */
#endif
#define CONFIG_PATH CAP_DIR "/cuda-cap.conf"
#define LEDGER_PATH CAP_DIR "/cuda-cap.ledger"
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
static unsigned long long cap = ~0ULL;       /* this process's cap; ~0: no cap */
static unsigned long long shared_cap = ~0ULL; /* the container's (the file's); ~0: none */
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

static void ledger_open(void);

static void read_cap(void) {
    cap = shared_cap = file_cap();
    const char *env = getenv("COHORT_CUDA_CAP_BYTES");
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end == 0 && v < cap) cap = v;
    }
    ledger_open();
}

static unsigned long long the_cap(void) {
    pthread_once(&cap_once, read_cap);
    return cap;
}

/* ---- the ledger: the container's cap as file locks (see the header) ---- */

#define UNIT (1ULL << 20)            /* one locked offset per MiB */
#define GUARD_OFFSET 0               /* held while a process looks for room and takes it */
#define DEVICE_BASE(d) (((off_t)(d) + 1) << 32)
#define MAX_GAPS 4096                /* look no further than this many holders' ranges */

struct range { off_t start, end; };  /* [start, end) in offsets */
static int ledger_hold = -1;         /* the description this process's locks are on */
static int ledger_look = -1;         /* another one: sees this process's locks as others' */
static int ledger_broken;            /* the file sets the cap but the ledger is unusable */
static struct range *held[MAX_DEVICES];
static size_t held_count[MAX_DEVICES], held_room[MAX_DEVICES];
static unsigned long long held_units[MAX_DEVICES];

static void forget_all_in_child(void);
static int open_ledger_fd(void) {
    int fd = open(LEDGER_PATH, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0) return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void ledger_open(void) {
    struct stat dir;
    /* No cap from the file (none, or one refused anyway): no ledger to share. */
    if (shared_cap == ~0ULL || shared_cap == 0) return;
    ledger_hold = open_ledger_fd();
    ledger_look = ledger_hold >= 0 ? open_ledger_fd() : -1;
    /* A directory others could write would let them swap the file for their own. */
    int sound = ledger_hold >= 0 && ledger_look >= 0 && lstat(CAP_DIR, &dir) == 0 &&
                S_ISDIR(dir.st_mode) && dir.st_uid == 0 && !(dir.st_mode & 022);
    if (!sound) {
        if (ledger_hold >= 0) close(ledger_hold);
        if (ledger_look >= 0) close(ledger_look);
        ledger_hold = ledger_look = -1;
        ledger_broken = 1;
        return;
    }
    pthread_atfork(NULL, NULL, forget_all_in_child);
}

static int ledger_lock(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len, .l_pid = 0};
    return fcntl(fd, cmd, &fl);
}

/* The guard: one process at a time looks for room and takes it. Someone holding it for good
 * (only a student's own program can) makes this process's allocations fail after 10 s. */
static int guard_take(void) {
    for (int tries = 0; tries < 10000; tries++) {
        if (ledger_lock(ledger_hold, F_OFD_SETLK, F_WRLCK, GUARD_OFFSET, 1) == 0) return 1;
        if (errno != EAGAIN && errno != EACCES && errno != EINTR) return 0;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

static void guard_give(void) { ledger_lock(ledger_hold, F_OFD_SETLK, F_UNLCK, GUARD_OFFSET, 1); }

/* The free ranges of [lo, hi): where nobody (this process included) holds a lock. Returns how
 * many were written to `gaps` (at most `room`), or -1 when there were too many holders to look. */
static long free_ranges(off_t lo, off_t hi, struct range *gaps, size_t room) {
    static struct range todo[MAX_GAPS + 2]; /* callers hold `lock` */
    size_t pending = 0, found = 0;
    int looks = 0;
    todo[pending++] = (struct range){lo, hi};
    while (pending) {
        struct range r = todo[--pending];
        if (r.start >= r.end) continue;
        if (++looks > MAX_GAPS) return -1;
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = r.start,
                           .l_len = r.end - r.start, .l_pid = 0};
        if (fcntl(ledger_look, F_OFD_GETLK, &fl) != 0) return -1;
        if (fl.l_type == F_UNLCK) {
            if (found == room) return -1;
            gaps[found++] = r;
            continue;
        }
        off_t s = fl.l_start > r.start ? fl.l_start : r.start;
        off_t e = fl.l_len == 0 || fl.l_start + fl.l_len > r.end ? r.end : fl.l_start + fl.l_len;
        todo[pending++] = (struct range){e, r.end};
        todo[pending++] = (struct range){r.start, s};
    }
    return (long)found;
}

static unsigned long long free_units(const struct range *gaps, long n) {
    unsigned long long units = 0;
    for (long i = 0; i < n; i++) units += (unsigned long long)(gaps[i].end - gaps[i].start);
    return units;
}

static int remember_held(int device, off_t start, off_t end) {
    size_t n = held_count[device];
    if (n && held[device][n - 1].end == start) {
        held[device][n - 1].end = end;
    } else {
        if (n == held_room[device]) {
            size_t room = held_room[device] ? held_room[device] * 2 : 16;
            struct range *grown = realloc(held[device], room * sizeof *grown);
            if (!grown) return 0;
            held[device] = grown;
            held_room[device] = room;
        }
        held[device][held_count[device]++] = (struct range){start, end};
    }
    held_units[device] += (unsigned long long)(end - start);
    return 1;
}

/* Lets go of the last `units` this process holds on `device`. */
static void give_units(int device, unsigned long long units) {
    while (units && held_count[device]) {
        struct range *r = &held[device][held_count[device] - 1];
        unsigned long long len = (unsigned long long)(r->end - r->start);
        unsigned long long take = len < units ? len : units;
        ledger_lock(ledger_hold, F_OFD_SETLK, F_UNLCK, r->end - (off_t)take, (off_t)take);
        r->end -= (off_t)take;
        if (r->end == r->start) held_count[device]--;
        held_units[device] -= take;
        units -= take;
    }
}

/* Takes `units` more of `device`'s cap for this process; 0 when the container has not room. */
static int take_units(int device, unsigned long long units) {
    static struct range gaps[MAX_GAPS];
    off_t base = DEVICE_BASE(device);
    if (!guard_take()) return 0;
    long n = free_ranges(base, base + (off_t)(shared_cap / UNIT), gaps, MAX_GAPS);
    int ok = n >= 0 && free_units(gaps, n) >= units;
    unsigned long long taken = 0;
    for (long i = 0; ok && i < n && taken < units; i++) {
        unsigned long long len = (unsigned long long)(gaps[i].end - gaps[i].start);
        unsigned long long take = len < units - taken ? len : units - taken;
        /* Fails only where a lock was taken outside the guard (a student's own program). */
        if (ledger_lock(ledger_hold, F_OFD_SETLK, F_WRLCK, gaps[i].start, (off_t)take) != 0) {
            ok = 0;
            break;
        }
        if (!remember_held(device, gaps[i].start, gaps[i].start + (off_t)take)) {
            ledger_lock(ledger_hold, F_OFD_SETLK, F_UNLCK, gaps[i].start, (off_t)take);
            ok = 0;
            break;
        }
        taken += take;
    }
    if (!ok) give_units(device, taken);
    guard_give();
    return ok;
}

/* What the container has left on `device` under the file's cap, by the ledger (this process's
 * own bytes exactly, the others' in whole MiB); ~0 when there is no ledger. */
static unsigned long long container_left(int device) {
    static struct range gaps[MAX_GAPS];
    if (ledger_hold < 0) return ledger_broken ? 0 : ~0ULL;
    off_t base = DEVICE_BASE(device);
    long n = free_ranges(base, base + (off_t)(shared_cap / UNIT), gaps, MAX_GAPS);
    if (n < 0) return 0;
    unsigned long long mine = held_units[device] * UNIT;
    unsigned long long room = free_units(gaps, n) * UNIT + mine;
    return room > used[device] ? room - used[device] : 0;
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

static unsigned long long units_for(unsigned long long bytes) { return (bytes + UNIT - 1) / UNIT; }

/* Holds `size` bytes on the current device; 0 when that would pass the process's cap or the
 * container's. */
static int reserve(int device, unsigned long long size) {
    unsigned long long limit = the_cap();
    pthread_mutex_lock(&lock);
    int ok = !ledger_broken && size <= limit && used[device] <= limit - size;
    if (ok && ledger_hold >= 0) {
        unsigned long long want = units_for(used[device] + size);
        ok = want <= held_units[device] || take_units(device, want - held_units[device]);
    }
    if (ok) used[device] += size;
    pthread_mutex_unlock(&lock);
    return ok;
}

/* Gives back the ledger's room this process no longer uses. Called with `lock` held. */
static void shrink(int device) {
    if (ledger_hold < 0) return;
    unsigned long long want = units_for(used[device]);
    if (held_units[device] > want) give_units(device, held_units[device] - want);
}

static void unreserve(int device, unsigned long long size) {
    pthread_mutex_lock(&lock);
    used[device] -= size;
    shrink(device);
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
        shrink(b->device);
        free(b);
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* After fork the child has none of its parent's device memory: it starts with nothing counted
 * and its own description (its parent's locks stay the parent's). */
static void forget_all_in_child(void) {
    pthread_mutex_init(&lock, NULL);
    if (ledger_hold >= 0) {
        close(ledger_hold);
        close(ledger_look);
        ledger_hold = open_ledger_fd();
        ledger_look = ledger_hold >= 0 ? open_ledger_fd() : -1;
        if (ledger_look < 0 && ledger_hold >= 0) close(ledger_hold), ledger_hold = -1;
        ledger_broken = ledger_hold < 0;
    }
    for (int d = 0; d < MAX_DEVICES; d++) used[d] = held_units[d] = held_count[d] = 0;
    for (unsigned i = 0; i < BUCKETS; i++) {
        while (buckets[i]) {
            struct block *b = buckets[i];
            buckets[i] = b->next;
            free(b);
        }
    }
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
    unsigned long long shared_left = container_left(dev);
    if (shared_left < left) left = shared_left;
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
