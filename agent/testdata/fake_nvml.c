/* A stand-in for libnvidia-ml.so with two fake GPUs, for tests on machines without a GPU.
 * GPU 0 is an A100 in MIG mode with two MIG devices (slots 0 and 2; slot 1 is empty);
 * GPU 1 is an L40S without MIG support, or, when $FAKE_NVML_ALL_MIG is set (not "0"), a second
 * A100 in MIG mode with one MIG device (slot 0). It answers only the NVML calls the agent makes.
 * Compute processes come from the file named by $FAKE_NVML_PROCESSES, read on every call: one
 * process a line, "<gpu index> <pid> <used bytes>" (a missing file means none).
 * GPU 0's utilisation: the number in the file named by $FAKE_NVML_UTILIZATION when there is one.
 * A wedged driver: while the file named by $FAKE_NVML_HANG_FILE exists, reading a GPU's memory
 * blocks (until the file is removed).
 * Build: cc -shared -fPIC -o libfake_nvml.so fake_nvml.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_FOUND 6

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

struct fake_device {
    const char *uuid, *name, *bus_id;
    unsigned int index, bus, util, temperature_c, power_mw;
    unsigned long long total, used;
    int mig_supported, mig_mode;
    struct fake_device *mig[3];
};
typedef struct fake_device *nvmlDevice_t;

#define GIB (1024ULL * 1024 * 1024)
static struct fake_device mig0 = {"MIG-4a3b1c2d-0000-4000-8000-000000000001", "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                                  "", 0, 0, 0, 0, 0, 20 * GIB, 0, 0, 0, {0}};
static struct fake_device mig2 = {"MIG-4a3b1c2d-0000-4000-8000-000000000002", "NVIDIA A100-SXM4-40GB MIG 2g.10gb",
                                  "", 2, 0, 0, 0, 0, 10 * GIB, 0, 0, 0, {0}};
static struct fake_device l40s = {"GPU-0f1e2d3c-0000-4000-8000-00000000140e", "NVIDIA L40S", "00000000:AF:00.0", 1,
                                  0xaf, 5, 35, 80000, 48 * GIB, 2 * GIB, 0, 0, {0}};
static struct fake_device gpus[2] = {
    {"GPU-0f1e2d3c-0000-4000-8000-00000000a100", "NVIDIA A100-SXM4-40GB", "00000000:3B:00.0", 0, 0x3b, 37, 41, 250000,
     40 * GIB, 1 * GIB, 1, 1, {&mig0, 0, &mig2}},
    {0},
};
static struct fake_device mig10 = {"MIG-4a3b1c2d-0000-4000-8000-000000000010", "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                                   "", 0, 0, 0, 0, 0, 20 * GIB, 0, 0, 0, {0}};
static struct fake_device second_a100 = {"GPU-0f1e2d3c-0000-4000-8000-00000000a101", "NVIDIA A100-SXM4-40GB",
                                         "00000000:AF:00.0", 1, 0xaf, 3, 39, 90000, 40 * GIB, 0, 1, 1,
                                         {&mig10, 0, 0}};
static int initialised;

static nvmlReturn_t copy_string(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    const char *all_mig = getenv("FAKE_NVML_ALL_MIG");
    gpus[1] = (all_mig && all_mig[0] && strcmp(all_mig, "0") != 0) ? second_a100 : l40s;
    initialised = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { initialised = 0; return NVML_SUCCESS; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len) {
    return copy_string(version, len, "550.54.15-fake");
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    *count = 2;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= 2 || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) { *index = d->index; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) { return copy_string(uuid, len, d->uuid); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) { return copy_string(name, len, d->name); }

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    const char *hang = getenv("FAKE_NVML_HANG_FILE");
    while (hang && hang[0] && access(hang, F_OK) == 0) usleep(50000);
    m->total = d->total;
    m->used = d->used;
    m->free = d->total - d->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    strncpy(p->busIdLegacy, d->bus_id + 4, sizeof p->busIdLegacy - 1);
    strncpy(p->busId, d->bus_id, sizeof p->busId - 1);
    p->bus = d->bus;
    p->pciDeviceId = 0x20b010de;
    p->pciSubSystemId = 0x134f10de;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    const char *path = getenv("FAKE_NVML_UTILIZATION");
    FILE *f = path && d->index == 0 ? fopen(path, "r") : NULL;
    u->gpu = d->util;
    if (f && fscanf(f, "%u", &u->gpu) != 1) u->gpu = d->util;
    if (f) fclose(f);
    u->memory = d->util / 2;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    if (!d->mig_supported) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)d->mig_mode;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count) {
    if (!d->mig_supported) return NVML_ERROR_NOT_SUPPORTED;
    *count = 3;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig) {
    if (!d->mig_supported) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= 3) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d->mig[index]) return NVML_ERROR_NOT_FOUND;
    *mig = d->mig[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    if (sensor != 0 || !d->temperature_c) return NVML_ERROR_NOT_SUPPORTED;
    *temp = d->temperature_c;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *milliwatts) {
    if (!d->power_mw) return NVML_ERROR_NOT_SUPPORTED;
    *milliwatts = d->power_mw;
    return NVML_SUCCESS;
}

/* nvmlProcessInfo_v2_t, the layout of the _v2 and _v3 calls. */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* Fills up to `room` entries of `out` (when not NULL) with `d`'s processes; returns how many. */
static unsigned int read_processes(nvmlDevice_t d, nvmlProcessInfo_t *out, unsigned int room) {
    const char *path = getenv("FAKE_NVML_PROCESSES");
    FILE *f = path ? fopen(path, "r") : NULL;
    unsigned int n = 0, gpu, pid;
    unsigned long long used;
    if (!f) return 0;
    while (fscanf(f, "%u %u %llu", &gpu, &pid, &used) == 3) {
        if (gpu != d->index || !d->bus_id[0]) continue; /* whole GPUs only, never MIG devices */
        if (out && n < room) {
            out[n].pid = pid;
            out[n].usedGpuMemory = used;
            out[n].gpuInstanceId = out[n].computeInstanceId = 0xFFFFFFFF;
        }
        n++;
    }
    fclose(f);
    return n;
}

static nvmlReturn_t running_processes(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    unsigned int room, n;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    room = infos ? *count : 0;
    n = read_processes(d, infos, room);
    *count = n;
    return n > room ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    return running_processes(d, count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    return running_processes(d, count, infos);
}
