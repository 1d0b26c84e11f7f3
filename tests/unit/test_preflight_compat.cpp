// The forward-compatibility decision (after NVIDIA's enable-cuda-compat hook) and the findings
// the preflight reports from facts.
#include <catch2/catch.hpp>

#include "preflight/compat.hpp"
#include "preflight/findings.hpp"
#include "preflight/preflight.hpp"

using namespace gpubox::preflight;

namespace {

CompatFacts compat(const std::string& version, bool note) {
    CompatFacts c;
    c.libcuda = {"libcuda.so." + version};
    c.version = version;
    c.files = {"libcuda.so." + version, "libnvidia-ptxjitcompiler.so." + version,
               "libcudadebugger.so.1"};
    if (note)
        c.note = CompatNote{"12.8", {535, 550, 560, 565, 570}, {1, 2, 7, 8, 9, 10, 11, 12, 13, 14}};
    return c;
}

HostFacts host(const std::string& driver, std::vector<GpuFacts> gpus = {}) {
    HostFacts h;
    h.driver = driver, h.driver_file = "/sys/module/nvidia/version";
    h.cuda = cuda_for_driver(driver);
    h.gpus_asked = !gpus.empty();
    h.gpus = std::move(gpus);
    return h;
}

GpuFacts gpu(const std::string& model, unsigned id) {
    GpuFacts g{1, "0000:5e:00.0", "GPU-x", model, brand_of(model), id, compute_capability_of(id)};
    g.id_file = "/sys/bus/pci/devices/0000:5e:00.0/device";
    return g;
}

std::vector<Verdict> verdicts(const Report& r, const std::string& check) {
    std::vector<Verdict> out;
    for (const Finding& f : r.findings)
        if (f.check == check) out.push_back(f.verdict);
    return out;
}

}  // namespace

TEST_CASE("forward compatibility: used only when newer and supported") {
    const std::vector<std::string> tesla = {"tesla"};
    CompatDecision d = decide_compat(compat("570.86.10", true), std::string("550.54.14"), tesla);
    CHECK(d.use);
    CHECK(d.cuda == "12.8");
    // Older or equal: never.
    CHECK_FALSE(decide_compat(compat("535.104.05", true), std::string("550.54.14"), tesla).use);
    CHECK_FALSE(decide_compat(compat("550.54.14", false), std::string("550.54.14"), tesla).use);
    // The note's driver list must hold the host's branch.
    CHECK_FALSE(decide_compat(compat("570.86.10", true), std::string("545.23.08"), tesla).use);
    // Without the note: the compat major must be above the host's (libnvidia-container's rule).
    CHECK(decide_compat(compat("570.86.10", false), std::string("550.54.14"), tesla).use);
    CHECK(decide_compat(compat("570.86.10", false), std::string("550.54.14"), tesla).cuda ==
          "12.8");
    CHECK_FALSE(decide_compat(compat("550.90.07", false), std::string("550.54.14"), tesla).use);
    // GeForce GPUs do not run forward compatibility.
    d = decide_compat(compat("570.86.10", true), std::string("550.54.14"), {"tesla", "geforce"});
    CHECK_FALSE(d.use);
    CHECK(d.reason == "a geforce GPU does not support forward compatibility");
    // Two compat libcudas: the toolkit uses none.
    CompatFacts two = compat("570.86.10", true);
    two.libcuda.push_back("libcuda.so.575.57.08");
    CHECK_FALSE(decide_compat(two, std::string("550.54.14"), tesla).use);
    CHECK_FALSE(decide_compat(std::nullopt, std::string("550.54.14"), tesla).present);
    const auto o = compat_overrides(compat("570.86.10", true));
    REQUIRE(o.size() == 2);
    CHECK(o[0] == std::make_pair(std::string("libcuda"),
                                 std::string("/usr/local/cuda/compat/libcuda.so.570.86.10")));
}

TEST_CASE("findings: the CUDA runtime against the driver, minor-version compatibility included") {
    ImageFacts img;
    img.cudart = "13.0.48", img.cudart_file = "/usr/local/cuda/lib64/libcudart.so.13.0.48";
    Report r = plan_findings(img, host("550.54.14"), {});
    CHECK(verdicts(r, "cuda") == std::vector<Verdict>{Verdict::fails});
    CHECK_FALSE(r.fits());
    img.cudart = "12.6.77";
    r = plan_findings(img, host("550.54.14"), {});
    CHECK(verdicts(r, "cuda") == std::vector<Verdict>{Verdict::note});
    CHECK(r.fits());
    img.cudart = "12.4.127";
    CHECK(verdicts(plan_findings(img, host("550.54.14"), {}), "cuda") ==
          std::vector<Verdict>{Verdict::fits});
    // 12.8 on a 12.4 driver is minor-version compatible; with the compat driver it is plain.
    img.cudart = "12.8.57";
    img.compat = compat("570.86.10", true);
    r = plan_findings(img, host("550.54.14", {gpu("Tesla T4", 0x1eb8)}), {});
    CHECK(r.compat.use);
    CHECK(verdicts(r, "cuda") == std::vector<Verdict>{Verdict::fits});
    CHECK(verdicts(r, "compat") == std::vector<Verdict>{Verdict::note});
}

TEST_CASE("findings: NVIDIA_REQUIRE_CUDA, and the toolkit's minor-version mistake") {
    ImageFacts img;
    const Requirement newer{"NVIDIA_REQUIRE_CUDA", "cuda>=12.8"};
    // 12.8 against a 12.4 driver: the toolkit refuses, minor-version compatibility runs it.
    CHECK(verdicts(plan_findings(img, host("550.54.14"), {newer}), "require") ==
          std::vector<Verdict>{Verdict::warn});
    // 13.0 against 12.4: a new major, which nothing but a newer driver runs.
    const Requirement major{"NVIDIA_REQUIRE_CUDA", "cuda>=13.0"};
    Report r = plan_findings(img, host("550.54.14"), {major});
    CHECK(verdicts(r, "require") == std::vector<Verdict>{Verdict::fails});
    CHECK(r.findings.front().detail.find("unsatisfied condition cuda>=13.0") != std::string::npos);
    // Below the minor-compatibility minimum (12.x needs >= 525.60.13) it fails too.
    CHECK(verdicts(plan_findings(img, host("520.61.05"), {{"--require", "cuda>=12.0"}}),
                   "require") == std::vector<Verdict>{Verdict::fails});
    CHECK(verdicts(plan_findings(img, host("550.54.14"), {{"--require", "cuda>=12.4"}}),
                   "require") == std::vector<Verdict>{Verdict::fits});
    CHECK(
        verdicts(plan_findings(img, host("550.54.14"), {{"--require", "cuda>12 x"}}), "require") ==
        std::vector<Verdict>{Verdict::fits});  // 12.4 > 12 holds before "x" is reached
    // With the image's compat driver, the requirement is met by its CUDA version: a note, since
    // nvidia-container-cli checks the host driver's.
    img.compat = compat("570.86.10", true);
    CHECK(verdicts(plan_findings(img, host("550.54.14"),
                                 {{"NVIDIA_REQUIRE_CUDA", "cuda>=12.8,arch>=8.0"}}),
                   "require") == std::vector<Verdict>{Verdict::note});
    // Per GPU: arch is each selected GPU's compute capability.
    img.compat.reset();
    r = plan_findings(img, host("550.54.14", {gpu("Tesla T4", 0x1eb8)}),
                      {{"--require", "arch>=8.0"}});
    CHECK(verdicts(r, "require") == std::vector<Verdict>{Verdict::fails});
}

TEST_CASE("findings: fat binaries against compute capability, x86-64 level against the CPU") {
    ImageFacts img;
    auto object = [](const std::string& path, std::vector<int> sass, std::vector<int> ptx) {
        return ObjectFacts{path, 0, FatbinTargets{std::move(sass), std::move(ptx), false}};
    };
    img.objects = {object("/sm90.so", {90}, {}), object("/sm80.so", {80}, {}),
                   object("/ptx80.so", {}, {80}), object("/host-only.so", {}, {})};
    Report r = plan_findings(img, host("550.54.14", {gpu("NVIDIA A100-SXM4-80GB", 0x20b0)}), {});
    CHECK(verdicts(r, "arch") ==
          std::vector<Verdict>{Verdict::fails, Verdict::note, Verdict::fits});
    CHECK(r.findings[0].file == "/sm90.so");
    CHECK(r.findings[1].detail.find("JIT") != std::string::npos);
    // sm_80 SASS runs on 8.6 (same major, lower minor); on 9.0 only PTX would.
    r = plan_findings(img, host("550.54.14", {gpu("NVIDIA H200", 0x2335)}), {});
    CHECK(verdicts(r, "arch") ==
          std::vector<Verdict>{Verdict::fails, Verdict::note, Verdict::fits});
    CHECK(r.findings[0].file == "/sm80.so");
    // An x86-64-v4 binary on a CPU without AVX-512.
    img.objects.clear();
    img.command = ObjectFacts{"/usr/bin/app", 4, std::nullopt};
    HostFacts h = host("550.54.14");
    h.cpu_flags =
        "cx8 cmov fxsr mmx sse sse2 cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 "
        "f16c "
        "fma abm movbe xsave";
    h.cpu_file = "/proc/cpuinfo";
    r = plan_findings(img, h, {});
    CHECK(verdicts(r, "isa") == std::vector<Verdict>{Verdict::fails});
    CHECK(r.findings[0].detail.find("avx512f") != std::string::npos);
    h.cpu_flags += " avx512f avx512bw avx512cd avx512dq avx512vl";
    CHECK(verdicts(plan_findings(img, h, {}), "isa") == std::vector<Verdict>{Verdict::fits});
}

TEST_CASE("forward compatibility: the run's planner takes the preflight's decision, once") {
    const CompatFacts c = compat("570.86.10", true);
    const std::vector<std::string> h100 = {"NVIDIA H100 80GB HBM3"};
    std::string why;
    // Decided here: newer, supported, a datacenter GPU.
    CHECK(forward_compat(c, std::string("550.54.14"), h100, why).size() == 2);
    // The preflight's decision on the same driver and GPUs is the one used, whatever it was,
    // so that its warning and the run's mounts cannot disagree.
    RunFacts taken;
    taken.decision = CompatDecision{true, false, "", "taken by the preflight"};
    taken.decided_driver = "550.54.14";
    taken.decided_brands = {brand_of(h100[0])};
    CHECK(forward_compat(c, std::string("550.54.14"), h100, why, taken).empty());
    CHECK(why == "not using " + c.dir + ": taken by the preflight");
    // Taken on other GPUs (a lease names them only later) or another driver: decided anew.
    RunFacts other = taken;
    other.decided_brands = {brand_of("NVIDIA GeForce RTX 4090")};
    CHECK(forward_compat(c, std::string("550.54.14"), h100, why, other).size() == 2);
    CHECK(forward_compat(c, std::string("550.90.07"), h100, why, taken).size() == 2);
}
