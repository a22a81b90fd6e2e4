/* A stand-in libnvidia-ml.so.1 for kitty's tests (this machine has no GPU).
 *
 * It exports the NVML functions kitty calls, with NVML's ABI, and answers from
 * a "key=value" file named by $KITTY_NVML_STUB, re-read on every call so a test
 * can change a GPU while kitty runs. Keys (N = GPU index):
 *   count, driver, gpu.N.{name,util,mem_util,mem_total,mem_used,power_mw,
 *   energy_mj,temp,sm_clock,sm_clock_max,mem_clock,mem_clock_max,throttle,
 *   pcie_rx_kb,pcie_tx_kb,pcie_gen,pcie_width,ecc_sbe,ecc_dbe,lost,hang_ms,
 *   pids,proc_util,nvlinks,nvlink_crc,nvlink_tx_kib,nvlink_rx_kib,uuid,bus_id}
 *   pids = "pid:bytes,pid:bytes"   proc_util = "pid:sm%,pid:sm%"
 *   xid.seq, xid.gpu, xid.code   (a new seq delivers one XID event)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
enum { OK = 0, INVALID_ARG = 2, NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7, TIMEOUT = 10, GPU_LOST = 15 };

typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
typedef struct { nvmlDevice_t device; unsigned long long eventType, eventData; unsigned int gpuInstanceId, computeInstanceId; } nvmlEventData_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
typedef struct { unsigned int pid; unsigned long long timeStamp; unsigned int smUtil, memUtil, encUtil, decUtil; } nvmlProcessUtilizationSample_t;
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType; /* 3: unsigned long long */
    nvmlReturn_t nvmlReturn;
    unsigned long long value;
} nvmlFieldValue_t;

static int lookup(const char *key, char *out, size_t n) {
    const char *path = getenv("KITTY_NVML_STUB");
    if (!path) return 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    size_t kl = strlen(key);
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            char *v = line + kl + 1;
            v[strcspn(v, "\r\n")] = 0;
            snprintf(out, n, "%s", v);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static long long num(const char *key, long long def) {
    char v[256];
    return lookup(key, v, sizeof v) ? strtoll(v, NULL, 0) : def;
}

static long long gnum(unsigned int i, const char *field, long long def) {
    char key[128];
    snprintf(key, sizeof key, "gpu.%u.%s", i, field);
    return num(key, def);
}

static nvmlDevice_t handle(unsigned int i) { return (nvmlDevice_t)(uintptr_t)(i + 1); }
static unsigned int index_of(nvmlDevice_t d) { return (unsigned int)((uintptr_t)d - 1); }

/* Every device call: lost GPUs answer GPU_IS_LOST, hung ones sleep first. */
#define DEV(d)                                                     \
    unsigned int i = index_of(d);                                  \
    if (i >= (unsigned int)num("count", 0)) return INVALID_ARG;    \
    if (gnum(i, "hang_ms", 0) > 0) usleep(gnum(i, "hang_ms", 0) * 1000); \
    if (gnum(i, "lost", 0)) return GPU_LOST;

nvmlReturn_t nvmlInit_v2(void) { return getenv("KITTY_NVML_STUB") ? OK : 9; /* DRIVER_NOT_LOADED */ }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(nvmlReturn_t r) { (void)r; return "stub error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    char d[64] = "550.00-stub";
    lookup("driver", d, sizeof d);
    snprintf(v, n, "%s", d);
    return OK;
}
/* kitty polls the count first: the second call means the first poll is
 * complete, which the stub notes in "$KITTY_NVML_STUB.polled" for tests. */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) {
    static int polls;
    if (++polls == 2) {
        char marker[4096];
        snprintf(marker, sizeof marker, "%s.polled", getenv("KITTY_NVML_STUB"));
        FILE *m = fopen(marker, "w");
        if (m) fclose(m);
    }
    *c = (unsigned int)num("count", 0);
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (i >= (unsigned int)num("count", 0)) return INVALID_ARG;
    if (gnum(i, "lost", 0)) return GPU_LOST;
    *d = handle(i);
    return OK;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *out) { *out = index_of(d); return OK; }
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int n) {
    DEV(d);
    char key[64], v[96] = "NVIDIA H200 (stub)";
    snprintf(key, sizeof key, "gpu.%u.name", i);
    lookup(key, v, sizeof v);
    snprintf(name, n, "%s", v);
    return OK;
}
/* nvml.h's nvmlPciInfo_t: the bus id kitty maps to a NUMA node in sysfs. */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    DEV(d);
    char key[64], v[32];
    memset(p, 0, sizeof *p);
    snprintf(v, sizeof v, "00000000:%02X:00.0", 0x10 + i);
    snprintf(key, sizeof key, "gpu.%u.bus_id", i);
    lookup(key, v, sizeof v);
    snprintf(p->busId, sizeof p->busId, "%s", v);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%.15s", v + 4);
    p->bus = 0x10 + i;
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int n) {
    DEV(d);
    char key[64], v[96];
    snprintf(v, sizeof v, "GPU-5a1b0000-0000-4000-8000-%012u", i);
    snprintf(key, sizeof key, "gpu.%u.uuid", i);
    lookup(key, v, sizeof v);
    snprintf(uuid, n, "%s", v);
    return OK;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    DEV(d);
    u->gpu = (unsigned int)gnum(i, "util", 95);
    u->memory = (unsigned int)gnum(i, "mem_util", 40);
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    DEV(d);
    m->total = (unsigned long long)gnum(i, "mem_total", 150ll << 30);
    m->used = (unsigned long long)gnum(i, "mem_used", 60ll << 30);
    m->reserved = 0;
    m->free = m->total - m->used;
    return OK;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) { DEV(d); *mw = (unsigned int)gnum(i, "power_mw", 600000); return OK; }
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
    DEV(d);
    *mj = (unsigned long long)gnum(i, "energy_mj", 1000000);
    return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t) { DEV(d); (void)sensor; *t = (unsigned int)gnum(i, "temp", 60); return OK; }
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEV(d);
    *mhz = (unsigned int)(type == 2 ? gnum(i, "mem_clock", 2619) : gnum(i, "sm_clock", 1980));
    return OK;
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *mhz) {
    DEV(d);
    *mhz = (unsigned int)(type == 2 ? gnum(i, "mem_clock_max", 2619) : gnum(i, "sm_clock_max", 1980));
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
    DEV(d);
    *r = (unsigned long long)gnum(i, "throttle", 0);
    return OK;
}
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, int counter, unsigned int *kb) {
    DEV(d);
    *kb = (unsigned int)(counter == 1 ? gnum(i, "pcie_rx_kb", 1000) : gnum(i, "pcie_tx_kb", 2000));
    return OK;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *g) { DEV(d); *g = (unsigned int)gnum(i, "pcie_gen", 5); return OK; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *w) { DEV(d); *w = (unsigned int)gnum(i, "pcie_width", 16); return OK; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n) {
    DEV(d);
    (void)counter;
    *n = (unsigned long long)(type == 0 ? gnum(i, "ecc_sbe", 0) : gnum(i, "ecc_dbe", 0));
    return OK;
}
nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t d, int cause, unsigned int *c, unsigned long long *a, unsigned long long *t) {
    DEV(d);
    (void)cause; (void)c; (void)a; (void)t;
    return NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *out) {
    DEV(d);
    char key[64], v[2048] = "";
    snprintf(key, sizeof key, "gpu.%u.pids", i);
    lookup(key, v, sizeof v);
    nvmlProcessInfo_t list[64];
    unsigned int n = 0;
    for (char *tok = strtok(v, ","); tok && n < 64; tok = strtok(NULL, ",")) {
        memset(&list[n], 0, sizeof list[n]);
        list[n].pid = (unsigned int)strtoul(tok, NULL, 10);
        char *colon = strchr(tok, ':');
        list[n].usedGpuMemory = colon ? strtoull(colon + 1, NULL, 10) : 0;
        list[n].gpuInstanceId = 0xFFFFFFFF;
        list[n].computeInstanceId = 0xFFFFFFFF;
        n++;
    }
    if (*count < n) { *count = n; return n ? INSUFFICIENT_SIZE : OK; }
    memcpy(out, list, n * sizeof list[0]);
    *count = n;
    return OK;
}
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s) { DEV(d); s->isSupportedDevice = 0; return OK; }
nvmlReturn_t nvmlGpmSampleFree(void *s) { (void)s; return OK; }

static unsigned long long delivered;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) { *set = (nvmlEventSet_t)(uintptr_t)0x5e7; return OK; }
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) { (void)set; return OK; }
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) { DEV(d); *types = 8; return OK; }
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) { DEV(d); (void)types; (void)set; return OK; }
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
    (void)set;
    unsigned long long seq = (unsigned long long)num("xid.seq", 0);
    if (seq > delivered) {
        delivered = seq;
        memset(data, 0, sizeof *data);
        data->device = handle((unsigned int)num("xid.gpu", 0));
        data->eventType = 8; /* nvmlEventTypeXidCriticalError */
        data->eventData = (unsigned long long)num("xid.code", 0);
        return OK;
    }
    usleep((timeout_ms < 200 ? timeout_ms : 200) * 1000);
    return TIMEOUT;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *out, unsigned int *count, unsigned long long since) {
    DEV(d);
    (void)since;
    char key[64], v[2048] = "";
    snprintf(key, sizeof key, "gpu.%u.proc_util", i);
    if (!lookup(key, v, sizeof v)) return NOT_SUPPORTED;
    nvmlProcessUtilizationSample_t list[64];
    unsigned int n = 0;
    for (char *tok = strtok(v, ","); tok && n < 64; tok = strtok(NULL, ",")) {
        memset(&list[n], 0, sizeof list[n]);
        list[n].pid = (unsigned int)strtoul(tok, NULL, 10);
        char *colon = strchr(tok, ':');
        list[n].smUtil = colon ? (unsigned int)strtoul(colon + 1, NULL, 10) : 0;
        list[n].timeStamp = 1000 + n;
        n++;
    }
    if (out == NULL || *count < n) { *count = n; return n ? INSUFFICIENT_SIZE : OK; }
    memcpy(out, list, n * sizeof list[0]);
    *count = n;
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *active) {
    DEV(d);
    unsigned int links = (unsigned int)gnum(i, "nvlinks", 0);
    if (links == 0 || link >= 18) return NOT_SUPPORTED;
    *active = link < links;
    return OK;
}
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t d, unsigned int link, int counter, unsigned long long *n) {
    DEV(d);
    /* counter 2 = CRC_FLIT: all CRC errors land on link 0 */
    *n = (counter == 2 && link == 0) ? (unsigned long long)gnum(i, "nvlink_crc", 0) : 0;
    return OK;
}
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    DEV(d);
    for (int k = 0; k < count; k++) {
        values[k].valueType = 3;
        values[k].nvmlReturn = OK;
        if (values[k].fieldId == 138) values[k].value = (unsigned long long)gnum(i, "nvlink_tx_kib", 0);
        else if (values[k].fieldId == 139) values[k].value = (unsigned long long)gnum(i, "nvlink_rx_kib", 0);
        else values[k].nvmlReturn = NOT_SUPPORTED;
    }
    return OK;
}
