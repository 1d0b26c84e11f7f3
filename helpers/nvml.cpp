// gpubox-nvml LIBNVML: asks the host driver's NVML, loaded from exactly that path (the
// libnvidia-ml.so.1 gpubox's discovery resolved under --driver-root, never by a search), what
// only it knows of MIG: each GPU's MIG mode and each MIG device's UUID, GPU and compute
// instance, name (which holds the profile) and memory. Prints the lines gpu/nvml_report.hpp
// reads. Dynamically linked (dlopen), so that gpubox stays static; run with an empty
// environment and fds 0-2 only, as gpubox runs every helper. The NVML types and prototypes are
// declared here, as NVML's documentation gives them.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr unsigned kBuf = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct nvmlPciInfo_t {  // nvmlPciInfo_v3
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
};
struct nvmlMemory_t {
    unsigned long long total, free, used;
};

struct Nvml {
    nvmlReturn_t (*init)();
    nvmlReturn_t (*shutdown)();
    const char* (*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char*, unsigned);
    nvmlReturn_t (*count)(unsigned*);
    nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t*);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t*);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned);
    nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned);
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*);
    nvmlReturn_t (*max_mig)(nvmlDevice_t, unsigned*);
    nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned, nvmlDevice_t*);
    nvmlReturn_t (*gi)(nvmlDevice_t, unsigned*);
    nvmlReturn_t (*ci)(nvmlDevice_t, unsigned*);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
};

template <typename F>
bool bind(void* lib, const char* symbol, F& out) {
    out = reinterpret_cast<F>(dlsym(lib, symbol));
    if (!out) std::fprintf(stderr, "dlsym(%s): %s\n", symbol, dlerror());
    return out != nullptr;
}

// Printable ASCII without spaces where a word is expected: a driver's text never needs more.
void clean(char* s, bool spaces) {
    for (; *s; ++s)
        if (*s < 0x21 || *s > 0x7e) *s = (spaces && *s == ' ') ? ' ' : '_';
}

void mig_devices(const Nvml& n, nvmlDevice_t gpu) {
    unsigned max = 0;
    if (n.max_mig(gpu, &max) != NVML_SUCCESS) return;
    for (unsigned i = 0; i < max && i < 64; ++i) {
        nvmlDevice_t m = nullptr;
        if (n.mig_by_index(gpu, i, &m) != NVML_SUCCESS) continue;  // NOT_FOUND: a gap
        unsigned gi = 0, ci = 0;
        nvmlMemory_t mem{};
        char uuid[kBuf] = "", name[kBuf] = "";
        if (n.gi(m, &gi) != NVML_SUCCESS || n.ci(m, &ci) != NVML_SUCCESS ||
            n.uuid(m, uuid, kBuf) != NVML_SUCCESS)
            continue;
        if (n.memory(m, &mem) != NVML_SUCCESS) mem.total = 0;
        if (n.name(m, name, kBuf) != NVML_SUCCESS) name[0] = '\0';
        uuid[kBuf - 1] = name[kBuf - 1] = '\0';
        clean(uuid, false), clean(name, true);
        std::printf("mig %u %u %llu %s %s\n", gi, ci, mem.total, uuid, name);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2 || argv[1][0] != '/') {
        std::fputs("usage: gpubox-nvml /ABSOLUTE/PATH/libnvidia-ml.so.1\n", stderr);
        return 2;
    }
    alarm(20);  // a GPU that has fallen off the bus can hang NVML: give up rather than wait
    void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        std::fprintf(stderr, "dlopen(\"%s\"): %s\n", argv[1], dlerror());
        return 1;
    }
    Nvml n{};
    if (!bind(lib, "nvmlInit_v2", n.init) || !bind(lib, "nvmlShutdown", n.shutdown) ||
        !bind(lib, "nvmlErrorString", n.error_string) ||
        !bind(lib, "nvmlSystemGetDriverVersion", n.driver_version) ||
        !bind(lib, "nvmlDeviceGetCount_v2", n.count) ||
        !bind(lib, "nvmlDeviceGetHandleByIndex_v2", n.by_index) ||
        !bind(lib, "nvmlDeviceGetPciInfo_v3", n.pci) || !bind(lib, "nvmlDeviceGetUUID", n.uuid) ||
        !bind(lib, "nvmlDeviceGetName", n.name) || !bind(lib, "nvmlDeviceGetMigMode", n.mig_mode) ||
        !bind(lib, "nvmlDeviceGetMaxMigDeviceCount", n.max_mig) ||
        !bind(lib, "nvmlDeviceGetMigDeviceHandleByIndex", n.mig_by_index) ||
        !bind(lib, "nvmlDeviceGetGpuInstanceId", n.gi) ||
        !bind(lib, "nvmlDeviceGetComputeInstanceId", n.ci) ||
        !bind(lib, "nvmlDeviceGetMemoryInfo", n.memory))
        return 1;
    if (const nvmlReturn_t rc = n.init(); rc != NVML_SUCCESS) {
        std::fprintf(stderr, "nvmlInit_v2: %s\n", n.error_string(rc));
        return 1;
    }
    char version[80] = "";
    unsigned count = 0;
    if (n.driver_version(version, sizeof version) != NVML_SUCCESS) std::strcpy(version, "?");
    version[sizeof version - 1] = '\0';
    clean(version, false);
    if (const nvmlReturn_t rc = n.count(&count); rc != NVML_SUCCESS) {
        std::fprintf(stderr, "nvmlDeviceGetCount_v2: %s\n", n.error_string(rc));
        return 1;
    }
    std::printf("nvml %s\n", version);
    for (unsigned i = 0; i < count && i < 64; ++i) {
        nvmlDevice_t d = nullptr;
        nvmlPciInfo_t pci{};
        char uuid[kBuf] = "";
        if (n.by_index(i, &d) != NVML_SUCCESS || n.pci(d, &pci) != NVML_SUCCESS ||
            n.uuid(d, uuid, kBuf) != NVML_SUCCESS)
            continue;  // a GPU NVML cannot describe: /proc still does
        pci.busId[sizeof pci.busId - 1] = uuid[kBuf - 1] = '\0';
        clean(pci.busId, false), clean(uuid, false);
        unsigned cur = 0, pend = 0;
        const bool mig = n.mig_mode(d, &cur, &pend) == NVML_SUCCESS;  // NOT_SUPPORTED: no MIG
        if (mig) std::printf("gpu %s %s %u %u\n", pci.busId, uuid, cur ? 1 : 0, pend ? 1 : 0);
        else std::printf("gpu %s %s - -\n", pci.busId, uuid);
        if (mig && cur) mig_devices(n, d);
    }
    n.shutdown();
    return std::fflush(stdout) == 0 ? 0 : 1;
}
