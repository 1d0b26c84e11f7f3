// The preflight's readers: ELF sections and notes, fat binaries (the nvcc-built fixtures in
// tests/fixtures/cuda), NVIDIA's compat note, and discovery on FakeHost and image trees.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/ldcache.hpp"
#include "preflight/discover.hpp"
#include "preflight/elf.hpp"
#include "rootfs/view.hpp"
#include "tests/fixtures/fake_host.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::preflight;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

FatbinTargets fatbin_of(const std::string& name) {
    const std::string bytes = slurp(std::string(CUDA_FIXTURES) + "/" + name);
    const auto s = find_section(bytes, ".nv_fatbin");
    REQUIRE(s);
    return parse_fatbin(*s);
}

void put(const fs::path& p, const std::string& content) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
}

}  // namespace

TEST_CASE("fat binaries of nvcc-built objects") {
    FatbinTargets t = fatbin_of("libsm90only.so");
    CHECK(t.sass == std::vector<int>{90});
    CHECK(t.ptx.empty());
    CHECK(fatbin_of("libsm80only.so").sass == std::vector<int>{80});
    t = fatbin_of("libptx80only.so");
    CHECK(t.sass.empty());
    CHECK(t.ptx == std::vector<int>{80});
    t = fatbin_of("libmixed.so");
    CHECK(t.sass == std::vector<int>{75, 90});
    CHECK(t.ptx == std::vector<int>{90});
    CHECK_FALSE(t.malformed);
}

TEST_CASE("a damaged fat binary or ELF file is read within its bounds") {
    const std::string bytes = slurp(std::string(CUDA_FIXTURES) + "/libmixed.so");
    const auto s = find_section(bytes, ".nv_fatbin");
    REQUIRE(s);
    for (std::size_t cut : {std::size_t{8}, std::size_t{40}, std::size_t{100}, s->size() / 2}) {
        const FatbinTargets t = parse_fatbin(s->substr(0, cut));
        CHECK(t.malformed);
    }
    for (std::size_t cut : {std::size_t{0}, std::size_t{63}, std::size_t{64}, bytes.size() / 2}) {
        INFO(cut);
        CHECK_FALSE(find_section(bytes.substr(0, cut), ".nv_fatbin"));
        CHECK(x86_isa_needed(bytes.substr(0, cut)) == 0);
    }
    CHECK_FALSE(
        find_section("not an ELF file at all, but long enough to have a header........", ".text"));
}

TEST_CASE("the x86-64 level a GNU property note declares") {
    CHECK(x86_isa_needed(slurp(std::string(CUDA_FIXTURES) + "/isa-v4")) == 4);
    CHECK(x86_isa_needed(slurp(std::string(CUDA_FIXTURES) + "/libsm90only.so")) <= 1);
}

TEST_CASE("NVIDIA's .note.cuda.fwd_compatibility") {
    std::string problem;
    const auto note = parse_compat_note(slurp(FAKE_COMPAT_LIBCUDA), problem);
    REQUIRE(note);
    CHECK(note->cuda == "12.8");
    CHECK(note->drivers == std::vector<int>{535, 550, 560, 565, 570});
    CHECK(note->devices.size() == 10);
    CHECK(problem.empty());
    CHECK_FALSE(parse_compat_note(slurp(std::string(CUDA_FIXTURES) + "/libsm80only.so"), problem));
}

TEST_CASE("host facts from a simulated host: driver, CUDA version, compute capability, CPU") {
    test::TempDir t("preflight-host");
    test::FakeHost::Artifacts a{"", "", "", "", "", "", "", "", "/bin/true"};
    test::FakeHost(t.dir.string(), false).standard(2, "550.54.14", "535.104.05", a);
    HostFacts h = discover_host_facts(t.dir.string(), gpu::parse_gpu_spec("1"), true);
    CHECK(h.driver == "550.54.14");
    CHECK(h.cuda.cuda == "12.4");
    REQUIRE(h.gpus.size() == 1);
    CHECK(h.gpus[0].model == "NVIDIA RTX A6000");
    CHECK(h.gpus[0].brand == "nvidiartx");
    REQUIRE(h.gpus[0].cc);
    CHECK(h.gpus[0].cc->text() == "8.6");
    CHECK(h.cpu_model == "Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz");
    CHECK(h.cpu_flags == test::FakeHost::kBroadwellFlags);
    h = discover_host_facts(t.dir.string(), gpu::parse_gpu_spec("GPU-000000a0"), false);
    REQUIRE(h.gpus.size() == 1);
    CHECK(h.gpus[0].cc->text() == "7.5");
    CHECK(h.cpu_flags.empty());
    CHECK_THROWS_AS(discover_host_facts(t.dir.string(), gpu::parse_gpu_spec("7"), false),
                    PlanError);
    CHECK_THROWS_WITH(
        discover_host_facts("/nonexistent-driver-root-x", gpu::parse_gpu_spec("none"), false),
        Catch::Contains("is not a usable directory"));
    fs::remove(t.dir / "sys/module/nvidia/version");  // the driver's procfs file says it too
    CHECK(discover_host_facts(t.dir.string(), gpu::parse_gpu_spec("none"), false).driver_file ==
          "/proc/driver/nvidia/version");
    // A run without --gpu: the CPU's facts only; with neither, not even the driver root opened.
    h = discover_host_facts(t.dir.string(), gpu::parse_gpu_spec("none"), true, false);
    CHECK_FALSE(h.driver);
    CHECK(h.cpu_flags == test::FakeHost::kBroadwellFlags);
    CHECK_FALSE(
        discover_host_facts("/nonexistent-driver-root-x", gpu::parse_gpu_spec("none"), false, false)
            .driver);
}

TEST_CASE("image facts: runtime, toolkit, compat directory, the command's ELF facts") {
    test::TempDir t("preflight-image");
    const fs::path r = t.dir;
    put(r / "opt/cuda/lib/libcudart.so.12.6.77", "");
    fs::create_symlink("libcudart.so.12.6.77", r / "opt/cuda/lib/libcudart.so.12");
    put(r / "usr/local/cuda/lib64/libcudart.so.11.8.89", "");
    put(r / "usr/local/cuda/version.json",
        R"({"cuda": {"name": "CUDA SDK", "version": "12.6.2"}})");
    put(r / "etc/ld.so.cache",
        gpu::render_ldcache(
            {{gpu::kLdFlagsNative, "libcudart.so.12", "/opt/cuda/lib/libcudart.so.12", 0},
             {gpu::kLdFlagsNative, "libsm90only.so", "/opt/lib/libsm90only.so", 0}}));
    fs::create_directories(r / "opt/lib");
    fs::copy_file(std::string(CUDA_FIXTURES) + "/libsm90only.so", r / "opt/lib/libsm90only.so");
    fs::create_directories(r / "usr/local/cuda/compat");
    fs::copy_file(FAKE_COMPAT_LIBCUDA, r / "usr/local/cuda/compat/libcuda.so.570.86.10");
    fs::create_symlink("libcuda.so.570.86.10", r / "usr/local/cuda/compat/libcuda.so.1");
    fs::create_directories(r / "usr/bin");
    fs::copy_file(std::string(CUDA_FIXTURES) + "/isa-v4", r / "usr/bin/app");
    const UniqueFd root = rootfs::open_directory(r.string(), "ROOTFS");
    ImageFacts img =
        discover_image_facts(root.get(), r.string(), {{"PATH", "/usr/bin"}}, {"app", "/", true, 5});
    CHECK(img.cudart == "12.6.77");
    CHECK(img.cudart_file == "/opt/cuda/lib/libcudart.so.12.6.77");
    CHECK(img.toolkit == "12.6.2");
    REQUIRE(img.compat);
    CHECK(img.compat->version == "570.86.10");
    CHECK(img.compat->files == std::vector<std::string>{"libcuda.so.570.86.10"});
    REQUIRE(img.compat->note);
    CHECK(img.compat->note->cuda == "12.8");
    REQUIRE(img.command);
    CHECK(img.command->path == "/usr/bin/app");
    CHECK(img.command->isa == 4);
    REQUIRE(img.objects.size() == 1);
    CHECK(img.objects[0].fatbin->sass == std::vector<int>{90});
    img = discover_image_facts(root.get(), r.string(), {{"PATH", "/usr/bin"}},
                               {"missing", "/", false, 0});
    CHECK(img.command_problem == "\"missing\" is not in the image's PATH");
    img = discover_image_facts(root.get(), r.string(), {}, {"./app", "/usr/bin", false, 0});
    REQUIRE(img.command);
    CHECK(img.command->path == "/usr/bin/./app");
    CHECK(img.command->isa == 4);
    CHECK(img.objects.empty());
    // A run without --gpu: the command's ELF facts only, none of the image's CUDA parts.
    img = discover_image_facts(root.get(), r.string(), {}, {"/usr/bin/app", "/", false, 0, false});
    CHECK(img.cudart.empty());
    CHECK(img.toolkit.empty());
    CHECK_FALSE(img.compat);
    REQUIRE(img.command);
    CHECK(img.command->isa == 4);
}
