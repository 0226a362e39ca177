/* A stand-in for libnvidia-ml.so with two fake GPUs, for tests on machines without a GPU.
 * GPU 0 is an A100 in MIG mode with two MIG devices (slots 0 and 2; slot 1 is empty);
 * GPU 1 is an L40S without MIG support, or, when $FAKE_NVML_ALL_MIG is set (not "0"), a second
 * A100 in MIG mode with one MIG device (slot 0). It answers only the NVML calls the agent makes.
 * Compute processes come from the file named by $FAKE_NVML_PROCESSES, read on every call: one
 * process a line, "<gpu index> <pid> <used bytes> [<SM utilisation %>]" (a missing file means
 * none). Per-process utilisation (nvmlDeviceGetProcessUtilization) is "not supported" unless some
 * line has the fourth column; then, as NVML does, only processes above 0 % have a sample.
 * A script over time: the file named by $FAKE_NVML_GPUS, also read on every call, sets a GPU's
 * utilisation and memory used, one GPU a line, "<gpu index> <utilisation %> <memory used bytes>"
 * (a GPU without a line keeps its built-in figures). A test rewrites either file to move on.
 * GPU 0's utilisation alone: the number in the file named by $FAKE_NVML_UTILIZATION, when there
 * is one, overrides both (what scripts/gpu-check --fake writes).
 * More GPUs: $FAKE_NVML_COUNT (3 to 8) adds L40S cards after the two above, each its own UUID
 * and PCI address (benchmarks of a full GPU server).
 * A wedged driver: while the file named by $FAKE_NVML_HANG_FILE exists, reading a GPU's memory
 * blocks (until the file is removed).
 * Build: cc -shared -fPIC -o libfake_nvml.so fake_nvml.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
#define MAX_GPUS 8
static unsigned int gpu_count = 2;
static char extra_uuid[MAX_GPUS][48], extra_bus[MAX_GPUS][32];
static struct fake_device gpus[MAX_GPUS] = {
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

/* The line of $FAKE_NVML_GPUS for whole GPU `d`, if any: 1 with its figures, else 0. */
static int scripted_gpu(nvmlDevice_t d, unsigned int *util, unsigned long long *used) {
    const char *path = getenv("FAKE_NVML_GPUS");
    FILE *f = (path && d->bus_id[0]) ? fopen(path, "r") : NULL;
    char line[256];
    unsigned int gpu, u;
    unsigned long long m;
    int found = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%u %u %llu", &gpu, &u, &m) == 3 && gpu == d->index) {
            *util = u > 100 ? 100 : u;
            *used = m > d->total ? d->total : m;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static nvmlReturn_t copy_string(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    const char *all_mig = getenv("FAKE_NVML_ALL_MIG");
    const char *count = getenv("FAKE_NVML_COUNT");
    gpus[1] = (all_mig && all_mig[0] && strcmp(all_mig, "0") != 0) ? second_a100 : l40s;
    gpu_count = 2;
    if (count && atoi(count) > 2) gpu_count = atoi(count) > MAX_GPUS ? MAX_GPUS : (unsigned int)atoi(count);
    for (unsigned int i = 2; i < gpu_count; i++) {
        snprintf(extra_uuid[i], sizeof extra_uuid[i], "GPU-0f1e2d3c-0000-4000-8000-0000000014%02x", i);
        snprintf(extra_bus[i], sizeof extra_bus[i], "00000000:%02X:00.0", 0xb0 + i);
        gpus[i] = l40s;
        gpus[i].uuid = extra_uuid[i];
        gpus[i].bus_id = extra_bus[i];
        gpus[i].index = i;
        gpus[i].bus = 0xb0 + i;
    }
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
    *count = gpu_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= gpu_count || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) { *index = d->index; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) { return copy_string(uuid, len, d->uuid); }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) { return copy_string(name, len, d->name); }

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    const char *hang = getenv("FAKE_NVML_HANG_FILE");
    while (hang && hang[0] && access(hang, F_OK) == 0) usleep(50000);
    unsigned int util = d->util;
    unsigned long long used = d->used;
    scripted_gpu(d, &util, &used);
    m->total = d->total;
    m->used = used;
    m->free = d->total - used;
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
    unsigned int util = d->util;
    unsigned long long used = d->used;
    scripted_gpu(d, &util, &used);
    const char *path = getenv("FAKE_NVML_UTILIZATION");
    FILE *f = path && d->index == 0 ? fopen(path, "r") : NULL;
    unsigned int fixed;
    if (f && fscanf(f, "%u", &fixed) == 1) util = fixed;
    if (f) fclose(f);
    u->gpu = util;
    u->memory = util / 2;
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

/* One line of the processes file: its GPU, PID, memory and utilisation (-1: no fourth column). */
struct fake_process { unsigned int gpu, pid; unsigned long long used; int util; };

/* Calls `each` with every process of whole GPU `d` in the processes file; returns how many, and
 * sets *any_util when some line of the file (any GPU) has a utilisation column. */
static unsigned int scan_processes(nvmlDevice_t d, void (*each)(const struct fake_process *, void *), void *arg,
                                   int *any_util) {
    const char *path = getenv("FAKE_NVML_PROCESSES");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[256];
    unsigned int n = 0;
    if (any_util) *any_util = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        struct fake_process p;
        int fields = sscanf(line, "%u %u %llu %d", &p.gpu, &p.pid, &p.used, &p.util);
        if (fields < 3) continue;
        if (fields < 4) p.util = -1;
        else if (any_util) *any_util = 1;
        if (p.gpu != d->index || !d->bus_id[0]) continue; /* whole GPUs only, never MIG devices */
        if (each) each(&p, arg);
        n++;
    }
    fclose(f);
    return n;
}

struct fill { nvmlProcessInfo_t *out; unsigned int room, n; };

static void fill_one(const struct fake_process *p, void *arg) {
    struct fill *f = arg;
    if (f->out && f->n < f->room) {
        f->out[f->n].pid = p->pid;
        f->out[f->n].usedGpuMemory = p->used;
        f->out[f->n].gpuInstanceId = f->out[f->n].computeInstanceId = 0xFFFFFFFF;
    }
    f->n++;
}

/* Fills up to `room` entries of `out` (when not NULL) with `d`'s processes; returns how many. */
static unsigned int read_processes(nvmlDevice_t d, nvmlProcessInfo_t *out, unsigned int room) {
    struct fill f = {out, room, 0};
    return scan_processes(d, fill_one, &f, NULL);
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

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

struct samples { nvmlProcessUtilizationSample_t *out; unsigned int room, n; unsigned long long now; };

static void sample_one(const struct fake_process *p, void *arg) {
    struct samples *s = arg;
    if (p->util <= 0) return; /* NVML samples only processes above 0 % */
    if (s->out && s->n < s->room) {
        s->out[s->n].pid = p->pid;
        s->out[s->n].timeStamp = s->now;
        s->out[s->n].smUtil = p->util > 100 ? 100 : (unsigned int)p->util;
        s->out[s->n].memUtil = s->out[s->n].smUtil / 2;
        s->out[s->n].encUtil = s->out[s->n].decUtil = 0;
    }
    s->n++;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *count, unsigned long long lastSeenTimeStamp) {
    struct samples s = {utilization, utilization ? *count : 0, 0, (unsigned long long)time(NULL) * 1000000ULL};
    int any_util;
    (void)lastSeenTimeStamp;
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    scan_processes(d, sample_one, &s, &any_util);
    if (!any_util) return NVML_ERROR_NOT_SUPPORTED;
    *count = s.n;
    if (!utilization || s.n > s.room) return NVML_ERROR_INSUFFICIENT_SIZE;
    return NVML_SUCCESS;
}
