// The preflight's pure parts: versions, NVIDIA_REQUIRE_* with libnvidia-container's semantics,
// compute capabilities and brands, x86-64 levels, the forward-compatibility decision, and the
// findings they add up to.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "preflight/compat.hpp"
#include "preflight/device.hpp"
#include "preflight/findings.hpp"
#include "preflight/isa.hpp"
#include "preflight/require.hpp"
#include "preflight/version.hpp"
#include "tests/fixtures/fake_host.hpp"

using namespace gpubox;
using namespace gpubox::preflight;

namespace {

// What NVIDIA's cuda:12.4.1 images declare.
const std::string kRequire124 =
    "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
    "brand=nvidia,driver>=470,driver<471 brand=tesla,driver>=535,driver<536 "
    "brand=geforce,driver>=535,driver<536";

RequireFacts facts(std::string cuda, std::string driver, std::string arch = "",
                   std::string brand = "") {
    const bool device = !arch.empty() || !brand.empty();
    return {std::move(cuda), std::move(driver), std::move(arch), std::move(brand), device};
}

}  // namespace

TEST_CASE("versions compare as dsl_compare_version does") {
    const auto [a, b, want] =
        GENERATE(table<std::string, std::string, int>({{"12.4", "12.4", 0},
                                                       {"12.4", "12.4.0", 0},
                                                       {"12", "12.0.0", 0},
                                                       {"12.10", "12.9", 1},
                                                       {"550.54.14", "535.104.05", 1},
                                                       {"470", "471", -1},
                                                       {"12.4.1", "12.4", 1},
                                                       {"9", "10", -1}}));
    CHECK(compare_versions(a, b) == want);
    CHECK_FALSE(compare_versions("12.4a", "12.4"));
    CHECK_FALSE(compare_versions("", "1"));
    CHECK(major_minor("12.4.127") == "12.4");
    CHECK(major_minor("13") == "13.0");
    CHECK_FALSE(major_minor("v12"));
}

TEST_CASE("a driver's CUDA version comes from NVIDIA's branch table") {
    CHECK(cuda_for_driver("550.54.14").cuda == "12.4");
    CHECK(cuda_for_driver("535.104.05").cuda == "12.2");
    CHECK(cuda_for_driver("570.86.10").cuda == "12.8");
    CHECK(cuda_for_driver("580.65.06").cuda == "13.0");
    CHECK_FALSE(cuda_for_driver("550.54.14").lower_bound);
    const DriverCuda future = cuda_for_driver("610.10");
    CHECK(future.cuda == "13.1");
    CHECK(future.lower_bound);
    CHECK(cuda_for_driver("390.157").cuda.empty());
    CHECK(minor_compat_minimum(12) == "525.60.13");
    CHECK(minor_compat_minimum(10).empty());
}

TEST_CASE("NVIDIA_REQUIRE_CUDA: OR of ANDs, as nvidia-container-cli evaluates it") {
    CHECK(evaluate_requirement(kRequire124, facts("12.4", "550.54.14", "7.5", "tesla")).outcome ==
          Outcome::satisfied);
    // An R535 datacenter driver passes through its branch's alternative (forward compatibility).
    CHECK(evaluate_requirement(kRequire124, facts("12.2", "535.104.05", "8.0", "tesla")).outcome ==
          Outcome::satisfied);
    const Evaluation e =
        evaluate_requirement(kRequire124, facts("12.2", "535.104.05", "8.6", "nvidiartx"));
    CHECK(e.outcome == Outcome::unsatisfied);
    CHECK(e.condition == "cuda>=12.4");  // the first alternative, as the toolkit prints it
    // Names and brands compare case-insensitively; arch is the compute capability.
    CHECK(evaluate_requirement("CUDA>=12.0,brand=TESLA", facts("12.4", "550", "7.5", "tesla"))
              .outcome == Outcome::satisfied);
    CHECK(evaluate_requirement("arch>=8.0", facts("12.4", "550", "7.5", "tesla")).outcome ==
          Outcome::unsatisfied);
    CHECK(evaluate_requirement("arch>=8.0", facts("12.4", "550", "8.6", "nvidiartx")).outcome ==
          Outcome::satisfied);
    // Without a device, arch and brand hold; an unknown CUDA version holds too.
    CHECK(evaluate_requirement("arch>=9.0,brand=tesla", facts("12.4", "550")).outcome ==
          Outcome::satisfied);
    CHECK(evaluate_requirement("cuda>=99", facts("", "550")).outcome == Outcome::satisfied);
    // Extra spaces and commas are skipped; an empty expression holds.
    CHECK(evaluate_requirement("  cuda>=12.0,,driver>=500  ", facts("12.4", "550")).outcome ==
          Outcome::satisfied);
    CHECK(evaluate_requirement("", facts("12.4", "550")).outcome == Outcome::satisfied);
}

TEST_CASE("NVIDIA_REQUIRE_*: what the toolkit calls an invalid expression") {
    for (const char* bad :
         {"cuda==12.4", "cuda=>12", "gpu>=1", ">=12", "cuda>=", "cuda>=12.4a", "brand<tesla"}) {
        INFO(bad);
        CHECK(evaluate_requirement(bad, facts("12.4", "550", "8.0", "tesla")).outcome ==
              Outcome::invalid);
        CHECK_THROWS_AS(validate_requirement(bad, "--require"), UsageError);
    }
    // Only what is reached: an alternative after one that holds is never looked at.
    CHECK(evaluate_requirement("cuda>=12.0 nonsense", facts("12.4", "550")).outcome ==
          Outcome::satisfied);
    CHECK_NOTHROW(validate_requirement(kRequire124, "--require"));
    CHECK_THROWS_WITH(validate_requirement("cuda==12", "--require"),
                      Catch::Contains("invalid condition \"cuda==12\""));
}

TEST_CASE("requirements are collected from an image's environment as the toolkit does") {
    auto reqs = collect_requirements({{"NVIDIA_REQUIRE_CUDA", "cuda>=12.4"},
                                      {"NVIDIA_REQUIRE_JETPACK", "csv-mounts=all"},
                                      {"NVIDIA_REQUIRE_ARCH", "arch>=8.0"},
                                      {"PATH", "/bin"}});
    REQUIRE(reqs.size() == 2);
    CHECK(reqs[0].source == "NVIDIA_REQUIRE_ARCH");
    CHECK(reqs[1].expr == "cuda>=12.4");
    CHECK(collect_requirements(
              {{"NVIDIA_REQUIRE_CUDA", "cuda>=12.4"}, {"NVIDIA_DISABLE_REQUIRE", "true"}})
              .empty());
    CHECK(collect_requirements(
              {{"NVIDIA_REQUIRE_CUDA", "cuda>=12.4"}, {"NVIDIA_DISABLE_REQUIRE", "no"}})
              .size() == 1);
    reqs = collect_requirements({{"CUDA_VERSION", "11.8.0"}});  // a legacy image
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].expr == "cuda>=11.8");
}

TEST_CASE("compute capability by PCI device id, brand by model name") {
    const auto [id, want] = GENERATE(table<unsigned, std::string>({{0x1eb8, "7.5"},
                                                                   {0x20b0, "8.0"},
                                                                   {0x2230, "8.6"},
                                                                   {0x2335, "9.0"},
                                                                   {0x2330, "9.0"},
                                                                   {0x27b8, "8.9"},
                                                                   {0x1db4, "7.0"},
                                                                   {0x15f8, "6.0"},
                                                                   {0x2901, "10.0"},
                                                                   {0x2b85, "12.0"}}));
    REQUIRE(compute_capability_of(id));
    CHECK(compute_capability_of(id)->text() == want);
    CHECK_FALSE(compute_capability_of(0x0fff));
    CHECK(brand_of("Tesla T4") == "tesla");
    CHECK(brand_of("NVIDIA RTX A6000") == "nvidiartx");
    CHECK(brand_of("NVIDIA GeForce RTX 4090") == "geforce");
    CHECK(brand_of("NVIDIA H200") == "nvidia");
    CHECK(brand_of("Quadro RTX 8000") == "quadrortx");
    CHECK(brand_of("NVIDIA TITAN V") == "titan");
    CHECK(brand_number("nvidia") == 14);
    CHECK(brand_supports_forward_compat("tesla"));
    CHECK_FALSE(brand_supports_forward_compat("geforce"));
}

TEST_CASE("x86-64 levels from /proc/cpuinfo flags") {
    const std::string broadwell = test::FakeHost::kBroadwellFlags;
    CHECK(x86_level_of(broadwell) == 3);
    CHECK(x86_level_of(broadwell + " avx512f avx512bw avx512cd avx512dq avx512vl") == 4);
    CHECK(x86_level_of("") == 0);
    CHECK(x86_missing(broadwell, 4) == "avx512f avx512bw avx512cd avx512dq avx512vl");
    CHECK(x86_missing(broadwell, 3).empty());
    CHECK(x86_level_name(4) == "x86-64-v4");
}
