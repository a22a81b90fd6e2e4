/* A stand-in libnvidia-ml.so.1 for kitty's tests (this machine has no GPU).
 *
 * It exports the NVML functions kitty calls, with NVML's ABI, and answers from
 * a "key=value" file named by $KITTY_NVML_STUB, re-read on every call so a test
 * can change a GPU while kitty runs. Keys (N = GPU index):
 *   count, driver, gpu.N.{name,util,mem_util,mem_total,mem_used,power_mw,
 *   energy_mj,temp,sm_clock,sm_clock_max,mem_clock,mem_clock_max,throttle,
 *   pcie_rx_kb,pcie_tx_kb,pcie_gen,pcie_width,ecc_sbe,ecc_dbe,lost,hang_ms,
 *   pids,proc_util,nvlinks,nvlink_crc,nvlink_tx_kib,nvlink_rx_kib,uuid,bus_id,
 *   gpm,sm_active,sm_occupancy,tensor_active,dram_bw,pcie_tx_mib,pcie_rx_mib,
 *   fields,pcie_tx_step,pcie_rx_step}
 *   pids = "pid:bytes,pid:bytes"   proc_util = "pid:sm%,pid:sm%"
 *   xid.seq, xid.gpu, xid.code   (a new seq delivers one XID event)
 *   gpm=1 makes a GPU answer GPM (Hopper's metrics) with the four values
 *   above (and PCIe MiB/s where pcie_*_mib are set); the samples alive are
 *   counted in "$KITTY_NVML_STUB.gpm_live".
 *   fields=1 makes a GPU answer the field values of total energy and of the
 *   PCIe byte counters, which grow by pcie_*_step every read.
 *   The slow calls (max clocks, PCIe throughput, energy) are counted per GPU
 *   in "$KITTY_NVML_STUB.calls", a "name.gpu count" line each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef void *nvmlEventSet_t;
enum { OK = 0, INVALID_ARG = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6, INSUFFICIENT_SIZE = 7, TIMEOUT = 10, GPU_LOST = 15 };

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

/* Counts a call of a slow NVML function on GPU i, for the tests. */
static void count_call(const char *name, unsigned int i) {
    static char names[64][48];
    static long counts[64];
    static int used;
    char key[48], path[4096];
    int k;
    snprintf(key, sizeof key, "%s.%u", name, i);
    for (k = 0; k < used && strcmp(names[k], key); k++) {}
    if (k == used) {
        if (used == 64) return;
        snprintf(names[used++], sizeof names[0], "%s", key);
    }
    counts[k]++;
    snprintf(path, sizeof path, "%s.calls", getenv("KITTY_NVML_STUB"));
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int j = 0; j < used; j++) fprintf(f, "%s %ld\n", names[j], counts[j]);
    fclose(f);
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
    count_call("energy", i);
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
    count_call("max_clock", i);
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
    count_call("pcie_throughput", i);
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
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s) { DEV(d); s->isSupportedDevice = (unsigned int)gnum(i, "gpm", 0); return OK; }

/* A GPM sample: which GPU, and the how-manieth sample of it. */
typedef struct { unsigned int gpu; unsigned long long seq; } stub_gpm_sample;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    char *shortName, *longName, *unit;
} nvmlGpmMetric_t;
typedef struct {
    unsigned int version, numMetrics;
    stub_gpm_sample *sample1, *sample2;
    nvmlGpmMetric_t metrics[210];
} nvmlGpmMetricsGet_t;
static long gpm_live;
static unsigned long long gpm_seq;
static void gpm_note(long delta) {
    char path[4096];
    gpm_live += delta;
    snprintf(path, sizeof path, "%s.gpm_live", getenv("KITTY_NVML_STUB"));
    FILE *f = fopen(path, "w");
    if (f) { fprintf(f, "%ld\n", gpm_live); fclose(f); }
}
nvmlReturn_t nvmlGpmSampleAlloc(stub_gpm_sample **s) {
    *s = calloc(1, sizeof **s);
    if (!*s) return 999;
    gpm_note(1);
    return OK;
}
nvmlReturn_t nvmlGpmSampleFree(stub_gpm_sample *s) { if (s) { free(s); gpm_note(-1); } return OK; }
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, stub_gpm_sample *s) {
    DEV(d);
    if (!gnum(i, "gpm", 0)) return NOT_SUPPORTED;
    s->gpu = i;
    s->seq = ++gpm_seq;
    return OK;
}
/* Like NVML, the metrics need two samples of one GPU taken in order. */
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
    if (!m->sample1 || !m->sample2 || m->sample1->gpu != m->sample2->gpu
        || m->sample1->seq >= m->sample2->seq || m->numMetrics > 210)
        return INVALID_ARG;
    unsigned int i = m->sample1->gpu;
    for (unsigned int k = 0; k < m->numMetrics; k++) {
        unsigned int id = m->metrics[k].metricId;
        const char *field = id == 2 ? "sm_active"
            : id == 3 ? "sm_occupancy"
            : id == 5 ? "tensor_active"
            : id == 10 ? "dram_bw"
            : id == 20 ? "pcie_tx_mib"
            : id == 21 ? "pcie_rx_mib" : NULL;
        if (field && (id == 20 || id == 21) && gnum(i, field, -1) < 0) field = NULL;
        m->metrics[k].nvmlReturn = field ? OK : NOT_SUPPORTED;
        m->metrics[k].value = field ? (double)gnum(i, field, 0) : 0;
    }
    return OK;
}

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
    if (n == 0) return NOT_FOUND; /* no process ran since `since` */
    if (out == NULL || *count < n) { *count = n; return INSUFFICIENT_SIZE; }
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
        unsigned int id = values[k].fieldId;
        int fields = gnum(i, "fields", 0) != 0;
        if (id == 138) values[k].value = (unsigned long long)gnum(i, "nvlink_tx_kib", 0);
        else if (id == 139) values[k].value = (unsigned long long)gnum(i, "nvlink_rx_kib", 0);
        else if (id == 83 && fields) {
            count_call("energy_field", i);
            values[k].value = (unsigned long long)gnum(i, "energy_mj", 1000000);
        }
        else if ((id == 197 || id == 198) && fields && i < 64) {
            static unsigned long long reads[2][64];
            int rx = id == 198;
            reads[rx][i]++;
            values[k].value = reads[rx][i] * (unsigned long long)gnum(i, rx ? "pcie_rx_step" : "pcie_tx_step", 0);
        }
        else values[k].nvmlReturn = NOT_SUPPORTED;
    }
    return OK;
}
