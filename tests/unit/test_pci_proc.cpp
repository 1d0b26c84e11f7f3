#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "gpu/pci.hpp"
#include "gpu/proc_driver.hpp"

using namespace gpubox;
using namespace gpubox::gpu;

TEST_CASE("PCI addresses parse as numbers") {
    auto [text, domain, bus] =
        GENERATE(table<std::string, unsigned, unsigned>({{"0000:3b:00.0", 0, 0x3b},
                                                         {"00000000:3B:00.0", 0, 0x3b},
                                                         {"3b:00.0", 0, 0x3b},
                                                         {"10000:01:00.0", 0x10000, 0x01},
                                                         {"0001:5e:00.0", 1, 0x5e}}));
    auto a = parse_pci_address(text);
    REQUIRE(a);
    CHECK(a->domain == domain);
    CHECK(a->bus == bus);
}

TEST_CASE("4- and 8-digit domains name the same device") {
    CHECK(*parse_pci_address("00000000:3b:00.0") == *parse_pci_address("0000:3b:00.0"));
    CHECK(to_string(*parse_pci_address("00000000:3B:00.1")) == "0000:3b:00.1");
    CHECK(to_string(*parse_pci_address("10000:01:00.0")) == "10000:01:00.0");
    CHECK(*parse_pci_address("0000:3b:00.0") < *parse_pci_address("0000:5e:00.0"));
    CHECK(*parse_pci_address("0000:ff:00.0") < *parse_pci_address("0001:00:00.0"));
}

TEST_CASE("malformed PCI addresses are rejected") {
    auto text =
        GENERATE(as<std::string>{}, "", "3b:00", "zz:00.0", "0000:3b:00.0x", "0000:3b:20.0",
                 "0000:3b:00.8", "123456789:00:00.0", "0000::00.0", "0000:3b:00.", "a:b:c:d.0");
    CHECK_FALSE(parse_pci_address(text));
}

TEST_CASE("driver version from sysfs and both procfs shapes") {
    CHECK(parse_driver_version("550.54.14\n") == "550.54.14");
    CHECK(parse_driver_version(
              "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.135  Fri Jan 10 ...\n") ==
          "550.135");
    CHECK(parse_driver_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.77  "
                               "Release Build  (dvs@x)\n") == "565.77");
    CHECK_FALSE(parse_driver_version(""));
    CHECK_FALSE(parse_driver_version("NVRM version: x86_64 Kernel Module 5.\n"));
}

TEST_CASE("GPU information file") {
    auto info = parse_gpu_information(
        "Model: \t\t Tesla T4\nIRQ:   \t\t 142\nGPU UUID: \t GPU-abc\nBus Location: \t "
        "0000:3b:00.0\n"
        "Device Minor: \t 2\nGPU Excluded:\t No\n",
        "info");
    CHECK(info.model == "Tesla T4");
    CHECK(info.uuid == "GPU-abc");
    CHECK(info.bus_location == "0000:3b:00.0");
    CHECK(info.device_minor == 2);
    CHECK_THROWS_WITH(parse_gpu_information("Model: x\nBus Location: 0000:3b:00.0\n", "p"),
                      Catch::Matchers::Contains("no Device Minor"));
    CHECK_THROWS_AS(parse_gpu_information("Bus Location: 1:0.0\nDevice Minor: -1\n", "p"),
                    PlanError);
    CHECK_THROWS_AS(parse_gpu_information("Bus Location: 1:0.0\nDevice Minor: 255\n", "p"),
                    PlanError);
}

TEST_CASE("params get ModifyDeviceFiles: 0; /proc/devices majors") {
    CHECK(rewrite_params("A: 1\nModifyDeviceFiles: 1\nB: 2\n") ==
          "A: 1\nModifyDeviceFiles: 0\nB: 2\n");
    CHECK(rewrite_params("") == "ModifyDeviceFiles: 0\n");
    const std::string devs =
        "Character devices:\n195 nvidia-frontend\n508 nvidia-uvm\n\nBlock devices:\n509 nvidia\n";
    CHECK(parse_char_major(devs, "nvidia-uvm") == 508);
    CHECK(parse_char_major(devs, "nvidia-frontend") == 195);
    CHECK(parse_char_major(devs, "nvidia") == -1);  // a block major is not a character driver
}
