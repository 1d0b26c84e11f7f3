// NVML's MIG facts: gpubox-nvml's report, read (hostile output included), added to the
// inventory, and MIG devices selected by NVML's MIG-<uuid>.
#include <catch2/catch.hpp>

#include <string>

#include "common/error.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/inventory.hpp"
#include "gpu/nvml_report.hpp"
#include "tests/fixtures/fake_host.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::gpu;

namespace {

const std::string kMig110 = "MIG-5f0c2d1e-aaaa-bbbb-cccc-0123456789ab";

// As gpubox-nvml prints the simulated MIG host (GPU 1: 1:1:0, 1:1:1, 1:2:0; GPU 0: none).
const std::string kReport =
    "nvml 550.54.14\n"
    "gpu 00000000:3B:00.0 GPU-000000a0-1111-2222-3333-444400000010 1 1\n"
    "gpu 00000000:5E:00.0 GPU-000000a1-1111-2222-3333-444400000011 1 1\n"
    "mig 1 0 21072183296 " +
    kMig110 +
    " NVIDIA H100 80GB HBM3 MIG 1c.2g.20gb\n"
    "mig 1 1 21072183296 MIG-11111111-aaaa-bbbb-cccc-0123456789ab NVIDIA H100 80GB HBM3 MIG "
    "1c.2g.20gb\n"
    "mig 2 0 10468982784 MIG-22222222-aaaa-bbbb-cccc-0123456789ab NVIDIA H100 80GB HBM3 MIG "
    "1g.10gb\n"
    "gpu 00000000:86:00.0 GPU-000000a2-1111-2222-3333-444400000012 0 1\n"
    "gpu 00000000:AF:00.0 GPU-000000a3-1111-2222-3333-444400000013 - -\n"
    "future words we do not know\n";

struct MigHost : test::TempDir {
    test::FakeHost fake;
    MigHost() : TempDir("fakehost"), fake(dir.string(), false) {
        fake.standard(4, "550.54.14", "535.104.05", {"", "", "", "", "", "", "", "", "/bin/true"});
        fake.mig(0, 1, 2).mig(0, 2, 1).mig(2, 0);
    }
};

// The row of `gpubox list` for `id`, its cells set apart by single spaces.
std::string row(const std::string& table, const std::string& id) {
    const auto at = table.find("\n" + id + " ");
    if (at == std::string::npos) return "";
    std::string line = table.substr(at + 1, table.find('\n', at + 1) - at - 1), out;
    for (char c : line)
        if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
    return out;
}

}  // namespace

TEST_CASE("gpubox-nvml's report: GPUs by PCI address, MIG modes, MIG devices with profile") {
    const NvmlReport r = parse_nvml_report(kReport);
    CHECK(r.driver_version == "550.54.14");
    REQUIRE(r.gpus.size() == 4);
    CHECK(to_string(r.gpus[1].pci) == "0000:5e:00.0");
    CHECK((r.gpus[1].mig_mode == 1 && r.gpus[1].mig_pending == 1));
    CHECK((r.gpus[2].mig_mode == 0 && r.gpus[2].mig_pending == 1));
    CHECK((r.gpus[3].mig_mode == -1 && r.gpus[3].mig.empty()));
    REQUIRE(r.gpus[1].mig.size() == 3);
    CHECK(r.gpus[1].mig[0].uuid == kMig110);
    CHECK(r.gpus[1].mig[0].profile == "1c.2g.20gb");
    CHECK(r.gpus[1].mig[2].memory == 10468982784u);
    CHECK(r.gpus[1].mig[2].name == "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    CHECK(mig_profile_of("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me") == "1g.5gb+me");
    CHECK(mig_profile_of("NVIDIA H100 80GB HBM3") == "");
    CHECK(mig_profile_of("X MIG $(reboot)") == "");
}

TEST_CASE("gpubox-nvml's report: garbled or hostile output is not believed at all") {
    const std::string head = "nvml 550.54.14\ngpu 0000:5e:00.0 GPU-a1 1 1\n";
    for (const std::string& bad : {
             std::string("gpu 0000:5e:00.0 GPU-a1 1\n"),                // a field short
             std::string("gpu 0000:5e:00.0 GPU-a1 1 1 extra\n"),        // one too many
             std::string("gpu 0000:5e:00.0 GPU-a1 2 1\n"),              // no such mode
             std::string("gpu 0000:5e:99.0 GPU-a1 1 1\n"),              // no PCI address
             std::string("gpu 0000:5e:00.0 GPU-../../x 1 1\n"),         // not a UUID
             std::string("gpu 0000:5e:00.0 MIG-a1 1 1\n"),              // not a GPU's
             head + "mig 1 0 99999999999999999999999 MIG-x NAME\n",     // overflows
             head + "mig 15 0 1 MIG-x NAME\n",                          // GI beyond 14
             head + "mig 1 8 1 MIG-x NAME\n",                           // CI beyond 7
             head + "mig 1 0 1 GPU-x NAME\n",                           // not a MIG UUID
             head + "mig -1 0 1 MIG-x NAME\n",                          // negative
             head + "mig 1 0 1 MIG-x NAME\x1b[2J\n",                    // a terminal escape
             head + "mig 1 0 1 MIG-x " + std::string(600, 'A') + "\n",  // too long
             std::string("nvml 550\nmig 1 0 1 MIG-x NAME\n"),           // before any GPU
             std::string("gpu 0000:5e:00.0 GPU-a1 1 1\n"),              // no nvml line
             std::string(""),                                           // nothing
             std::string("\x7f\x45LF\x02\x01"),                         // not text
         }) {
        INFO(bad);
        CHECK_THROWS_AS(parse_nvml_report(bad), PlanError);
    }
    std::string many = "nvml 1.2\n";
    for (int i = 0; i < 65; ++i) many += "gpu 0000:5e:00.0 GPU-a1 0 0\n";
    CHECK_THROWS_WITH(parse_nvml_report(many), "gpubox-nvml's line 66 lists too many GPUs");
}

TEST_CASE("NVML's facts added to discovery; --gpu MIG-<uuid> selects that GPU:GI:CI") {
    MigHost h;
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    apply_nvml_report(inv, parse_nvml_report(kReport));
    CHECK(inv.nvml);
    CHECK((inv.gpus[0].mig_mode == 1 && inv.gpus[0].mig_instances == 0));
    CHECK((inv.gpus[2].mig_mode == 0 && inv.gpus[2].mig_pending == 1));
    CHECK(inv.gpus[3].mig_mode == -1);
    const MigDevice& m = inv.gpus[1].mig[0];
    CHECK((m.uuid == kMig110 && m.profile == "1c.2g.20gb" && m.memory == 21072183296u));

    CHECK(names_mig_uuid(parse_gpu_spec("0," + kMig110)));
    CHECK_FALSE(names_mig_uuid(parse_gpu_spec("MIG-GPU-000000a1-1111-2222-3333-444400000011/1/0")));
    CHECK_FALSE(names_mig_uuid(parse_gpu_spec("0")));
    std::vector<Gpu> sel = select_gpus(inv, parse_gpu_spec(kMig110));
    REQUIRE(sel.size() == 1);
    CHECK(sel[0].index == 1);
    CHECK_FALSE(sel[0].whole);
    REQUIRE(sel[0].mig.size() == 1);
    CHECK(mig_id(sel[0], sel[0].mig[0]) == "1:1:0");
    sel = select_gpus(inv, parse_gpu_spec("MIG-22222222-AAAA-bbbb-cccc-0123456789ab,1:1:0"));
    REQUIRE(sel[0].mig.size() == 2);
    CHECK(mig_id(sel[0], sel[0].mig[1]) == "1:2:0");
    CHECK_THROWS_WITH(
        select_gpus(inv, parse_gpu_spec("MIG-5f0c2d1e")),
        Catch::Matchers::StartsWith("--gpu MIG-5f0c2d1e: no MIG device has that UUID; MIG "
                                    "devices on this host: 1:1:0 (" +
                                    kMig110 + "), 1:1:1 ("));

    // A report from another host: nothing matches, nothing is taken.
    GpuInventory other = discover_gpus(h.dir.string(), kCapDefault);
    apply_nvml_report(other, parse_nvml_report("nvml 1.0\ngpu 0000:01:00.0 GPU-a0 1 1\n"
                                               "mig 1 0 1 " +
                                               kMig110 + " X MIG 7g.80gb\n"));
    CHECK(other.gpus[1].mig[0].uuid.empty());
    CHECK_THROWS_WITH(select_gpus(other, parse_gpu_spec(kMig110)),
                      Catch::Matchers::Contains("no MIG device has that UUID"));
}

TEST_CASE("gpubox list: MIG profile, memory and MIG-<uuid>, or one line saying they are unknown") {
    MigHost h;
    GpuInventory inv = discover_gpus(h.dir.string(), kCapDefault);
    inv.nvml_problem = "no helper gpubox-nvml (looked for /x)";
    std::string text = describe_gpus(inv);
    INFO(text);
    CHECK(
        row(text, "1:1:0") ==
        "1:1:0 0000:5e:00.0 nvidia MIG GI 1 CI 0 MIG-GPU-000000a1-1111-2222-3333-444400000011/1/0 "
        "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13");
    CHECK(text.find("\nMIG profiles, memory and MIG-<uuid>s unknown: no helper gpubox-nvml "
                    "(looked for /x)\n") != std::string::npos);
    apply_nvml_report(inv, parse_nvml_report(kReport));
    text = describe_gpus(inv);
    CHECK(row(text, "1:1:0") == "1:1:0 0000:5e:00.0 nvidia MIG 1c.2g.20gb 20096MiB GI 1 CI 0 " +
                                    kMig110 +
                                    " /dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 "
                                    "/dev/nvidia-caps/nvidia-cap13");
    CHECK(text.find("unknown") == std::string::npos);
}
