/* cuda-cap-probe: what a process sees of the GPU memory cap, through each way a program reaches
 * the driver: libcuda's exported symbols (linked), cuGetProcAddress (as the CUDA runtime does),
 * and dlopen + dlsym (as ctypes and the runtime's loader do). Prints `key=value` lines (CUresult
 * codes: 0 success, 2 CUDA_ERROR_OUT_OF_MEMORY); the caller (tests, scripts/gpu-check) judges
 * them. `cuda-cap-probe hold MIB` allocates MIB, prints `hold=` and `free_mib=` and keeps it until
 * killed; `cuda-cap-probe take MIB` allocates MIB, prints `take=` and `free_mib=`, and exits:
 * what one process sees of the container's other processes. Works against the real driver and against the test libcuda (agent/testdata/fake_cuda.c).
 * Build: cc -O1 -o cuda-cap-probe probe.c -L<dir of libcuda.so.1> -l:libcuda.so.1 -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { size_t Width, Height; int Format; unsigned NumChannels; } ArrayDesc;
CUresult cuInit(unsigned);
CUresult cuDeviceGet(int *, int);
CUresult cuCtxCreate_v2(void **, unsigned, int);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemCreate(unsigned long long *, size_t, const void *, unsigned long long);
CUresult cuMemRelease(unsigned long long);
CUresult cuArrayCreate_v2(void **, const ArrayDesc *);
CUresult cuArrayDestroy(void *);
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);

#define MIB (1024ULL * 1024)
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

/* `hold` or `take`: one allocation through the runtime's path, and what is left after it. */
static int one(const char *mode, unsigned long long mib) {
    alloc_fn alloc = 0;
    CUdeviceptr p = 0;
    size_t free_b = 0, total = 0;
    cuGetProcAddress("cuMemAlloc", (void **)&alloc, 12000, 0);
    printf("%s=%d\n", mode, alloc ? alloc(&p, mib * MIB) : -1);
    cuMemGetInfo_v2(&free_b, &total);
    printf("free_mib=%llu\n", (unsigned long long)free_b / MIB);
    fflush(stdout);
    if (strcmp(mode, "hold") == 0)
        for (;;) pause();
    return 0;
}

int main(int argc, char **argv) {
    int dev;
    void *ctx;
    size_t free_b = 0, total = 0, pitch = 0;
    CUdeviceptr a = 0, b = 0, c = 0;
    unsigned long long h = 0;
    void *arr = 0;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate_v2(&ctx, 0, dev)) {
        printf("init=failed\n");
        return 1;
    }
    if (argc == 3 && (strcmp(argv[1], "hold") == 0 || strcmp(argv[1], "take") == 0))
        return one(argv[1], strtoull(argv[2], 0, 10));
    cuMemGetInfo_v2(&free_b, &total);
    printf("total_mib=%llu\nfree_mib=%llu\n", (unsigned long long)total / MIB, (unsigned long long)free_b / MIB);
    printf("alloc_2g=%d\n", cuMemAlloc_v2(&a, 2048 * MIB));
    if (a) cuMemFree_v2(a), a = 0;
    printf("alloc_512m=%d\n", cuMemAlloc_v2(&a, 512 * MIB));
    cuMemGetInfo_v2(&free_b, &total);
    printf("free_after_512m_mib=%llu\n", (unsigned long long)free_b / MIB);

    /* With 512 MiB held, 768 MiB more passes a 1 GiB cap only if a path goes uncounted. */
    alloc_fn proc_alloc = 0;
    free_fn proc_free = 0;
    cuGetProcAddress("cuMemAlloc", (void **)&proc_alloc, 12000, 0);
    cuGetProcAddress("cuMemFree", (void **)&proc_free, 12000, 0);
    printf("procaddress_768m=%d\n", proc_alloc ? proc_alloc(&b, 768 * MIB) : -1);
    if (b && proc_free) proc_free(b), b = 0;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    alloc_fn sym_alloc = lib ? (alloc_fn)dlsym(lib, "cuMemAlloc_v2") : 0;
    printf("dlsym_768m=%d\n", sym_alloc ? sym_alloc(&c, 768 * MIB) : -1);
    if (c) cuMemFree_v2(c), c = 0;
    printf("managed_768m=%d\n", cuMemAllocManaged(&c, 768 * MIB, 1));
    if (c) cuMemFree_v2(c), c = 0;
    printf("pitch_768m=%d\n", cuMemAllocPitch_v2(&c, &pitch, 768 * 1024, 1024, 4));
    if (c) cuMemFree_v2(c), c = 0;
    printf("create_768m=%d\n", cuMemCreate(&h, 768 * MIB, 0, 0));
    if (h) cuMemRelease(h), h = 0;
    ArrayDesc desc = {16384, 12288, 0x20, 1}; /* 768 MiB of floats */
    printf("array_768m=%d\n", cuArrayCreate_v2(&arr, &desc));
    if (arr) cuArrayDestroy(arr), arr = 0;

    /* Freeing gives the room back: the same 768 MiB through cuGetProcAddress now fits. */
    printf("free_512m=%d\n", cuMemFree_v2(a));
    printf("procaddress_768m_after_free=%d\n", proc_alloc ? proc_alloc(&b, 768 * MIB) : -1);
    cuMemGetInfo_v2(&free_b, &total);
    printf("free_after_768m_mib=%llu\n", (unsigned long long)free_b / MIB);
    if (b && proc_free) proc_free(b);
    return 0;
}
