#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "launcher/commands/apparmor.hpp"
#include "launcher/cli/cli.hpp"

using namespace gpubox;
using namespace gpubox::launcher;

static Options parse(std::vector<std::string> args) { return parse_command_line(args); }

TEST_CASE("run: options stop at ROOTFS, the command keeps its own flags") {
    Options o = parse({"run", "--share-net", "--hostname", "box", "./rfs", "ls", "-la", "--root"});
    CHECK(o.command == Command::run);
    CHECK(o.share_net);
    CHECK(o.hostname == "box");
    CHECK(o.rootfs == "./rfs");
    CHECK(o.argv == std::vector<std::string>{"ls", "-la", "--root"});
    CHECK_FALSE(o.root);
}

TEST_CASE("run: -- separates ROOTFS from a command that looks like an option") {
    Options o = parse({"run", "rfs", "--", "--weird"});
    CHECK(o.argv == std::vector<std::string>{"--weird"});
    o = parse({"run", "--", "rfs", "true"});
    CHECK(o.rootfs == "rfs");
}

TEST_CASE("run: --opt=value and --opt value are the same") {
    CHECK(parse({"run", "--workdir=/srv", "r", "x"}).workdir == "/srv");
    CHECK(parse({"run", "--workdir", "/srv//a/", "r", "x"}).workdir == "/srv/a");
}

TEST_CASE("run: binds, tmpfs and env keep command-line order") {
    Options o = parse({"run", "--bind", "/a:/b", "--ro-bind", "/c:/c", "--tmpfs", "/t", "--env",
                       "A=1", "--env", "B=x=y", "r", "cmd"});
    REQUIRE(o.mounts.size() == 3);
    CHECK(o.mounts[0].type == rootfs::UserMount::Type::bind);
    CHECK(o.mounts[0].source == "/a");
    CHECK(o.mounts[0].target == "/b");
    CHECK(o.mounts[1].target == "/c");
    CHECK(o.mounts[2].type == rootfs::UserMount::Type::tmpfs);
    REQUIRE(o.env.size() == 2);
    CHECK(o.env[1] == std::pair<std::string, std::string>{"B", "x=y"});
}

TEST_CASE("run: bad input is a UsageError naming the option") {
    using Catch::Matchers::Contains;
    CHECK_THROWS_WITH(parse({"run", "--bogus", "r", "x"}), Contains("unknown option \"--bogus\""));
    CHECK(parse({"run", "r"})
              .argv.empty());  // an image's own Cmd, else "missing CMD" (test_image.cpp)
    CHECK_THROWS_WITH(parse({"run"}), Contains("missing ROOTFS"));
    CHECK_THROWS_WITH(parse({"run", "--hostname"}), Contains("--hostname needs a value"));
    CHECK_THROWS_WITH(parse({"run", "--bind", "/a:rel", "r", "x"}), Contains("is not absolute"));
    CHECK_THROWS_WITH(parse({"run", "--bind", "/a:/x/../etc", "r", "x"}), Contains("\"..\""));
    CHECK_THROWS_WITH(parse({"run", "--env", "1A=b", "r", "x"}), Contains("invalid variable name"));
    CHECK_THROWS_WITH(parse({"run", "--share-net=1", "r", "x"}), Contains("takes no value"));
    CHECK_THROWS_AS(parse({"frobnicate"}), UsageError);
    CHECK_THROWS_AS(parse({"run", "--no-seccomp", "--seccomp-bpf", "f", "r", "x"}), UsageError);
}

TEST_CASE("parse_size") {
    auto [text, bytes] = GENERATE(table<std::string, std::uint64_t>({{"4096B", 4096},
                                                                     {"64K", 64ULL << 10},
                                                                     {"256M", 256ULL << 20},
                                                                     {"2G", 2ULL << 30},
                                                                     {"3MiB", 3ULL << 20}}));
    CHECK(parse_size(text, "x") == bytes);
}

TEST_CASE("parse_size rejects junk") {
    auto text = GENERATE(as<std::string>{}, "", "M", "12X", "-1", "0", "0M", "256", "1.5G",
                         "99999999999999999G");
    CHECK_THROWS_AS(parse_size(text, "x"), UsageError);
}

TEST_CASE("parse_env_file skips comments and blanks, reports the line") {
    auto kv = parse_env_file("# c\n\nA=1\r\n  B=two words\n", "f");
    REQUIRE(kv.size() == 2);
    CHECK(kv[1].second == "two words");
    CHECK_THROWS_WITH(parse_env_file("A=1\nbad line\n", "f"), Catch::Matchers::Contains("line 2"));
}

TEST_CASE("rootfs create parsing") {
    Options o = parse({"rootfs", "create", "--busybox", "/x/bb", "dir"});
    CHECK(o.command == Command::rootfs_create);
    CHECK(o.create_dir == "dir");
    CHECK(o.busybox == "/x/bb");
    CHECK_THROWS_AS(parse({"rootfs", "create"}), UsageError);
}

TEST_CASE("parse_size: a bare number suggests the unit") {
    CHECK_THROWS_WITH(parse_size("256", "--memory-limit"),
                      "--memory-limit 256: no unit; did you mean 256M? (units: B, K, M, G)");
}

TEST_CASE("every subcommand takes --help") {
    for (std::vector<std::string> args :
         std::vector<std::vector<std::string>>{{"run", "--help"},
                                               {"run", "--share-net", "-h"},
                                               {"list", "--help"},
                                               {"doctor", "--help"},
                                               {"rootfs", "create", "--help"},
                                               {"rootfs", "--help"},
                                               {"help", "run"}}) {
        Options o = parse(args);
        CHECK(o.command == Command::help);
        CHECK_FALSE(o.help_topic.empty());
        CHECK_THAT(command_help(o.help_topic),
                   Catch::Matchers::StartsWith("usage: gpubox " + o.help_topic));
    }
    CHECK(parse({"--help"}).help_topic.empty());
    CHECK_THAT(usage_text(), Catch::Matchers::Contains("  --memory-limit SIZE "));
    CHECK_THAT(usage_text(), Catch::Matchers::Contains("  gpubox rootfs create "));
    CHECK_THROWS_AS(parse({"help", "frobnicate"}), UsageError);
}

TEST_CASE("conflicting options are one UsageError") {
    using Catch::Matchers::Equals;
    CHECK_THROWS_WITH(parse({"run", "--writable", "--read-only", "r", "x"}),
                      "run: --writable and --read-only contradict each other (choose one)");
    CHECK_THROWS_WITH(parse({"run", "--read-only", "--writable", "r", "x"}),
                      "run: --writable and --read-only contradict each other (choose one)");
    CHECK(parse({"run", "--writable", "--writable", "r", "x"}).root_mode ==
          rootfs::RootMode::writable);
    CHECK_THROWS_WITH(parse({"run", "--gpu", "0", "--gpu", "none", "r", "x"}),
                      "run: --gpu none contradicts --gpu 0");
}

TEST_CASE("a repeated --gpu is the union, de-duplicated") {
    using gpu::parse_gpu_spec, gpu::to_string;
    CHECK(to_string(parse({"run", "--gpu", "0", "--gpu", "1", "r", "x"}).gpu) == "0,1");
    CHECK(to_string(parse({"run", "--gpu", "0,1", "--gpu", "1,GPU-abc", "r", "x"}).gpu) ==
          "0,1,GPU-abc");
    CHECK(to_string(parse({"run", "--gpu", "0", "--gpu", "all", "r", "x"}).gpu) == "all");
    CHECK(to_string(parse({"run", "--gpu", "none", "r", "x"}).gpu) == "none");
    CHECK(to_string(merge_gpu_specs(parse_gpu_spec("all"), parse_gpu_spec("3"))) == "all");
}

TEST_CASE("--bind mistakes say what was meant") {
    CHECK_THROWS_WITH(parse({"run", "--bind", "/tmp", "/mnt", "./rootfs", "true"}),
                      "run: --bind takes one argument SRC:DST: did you mean --bind /tmp:/mnt?");
    CHECK_THROWS_WITH(
        parse({"run", "--ro-bind", "/etc", "./rootfs", "true"}),
        Catch::Matchers::StartsWith(
            "run: --ro-bind /etc: no destination: did you mean --ro-bind /etc:/etc?"));
    CHECK_THROWS_WITH(parse({"run", "--bind=/tmp", "/abs/rootfs", "true"}),
                      Catch::Matchers::StartsWith("run: --bind /tmp: no destination"));
}

TEST_CASE("--quiet, and the man page lists every option of every command") {
    CHECK(parse({"run", "--quiet", "r", "x"}).quiet);
    const std::string man = man_page();
    for (const CommandDoc& c : command_docs())
        for (const FlagDoc& f : c.flags) {
            std::string escaped;
            for (char ch : f.name) escaped += ch == '-' ? std::string("\\-") : std::string(1, ch);
            CHECK_THAT(man, Catch::Matchers::Contains("\\fB" + escaped + "\\fR"));
        }
    CHECK(parse({"--man"}).command == Command::man);
}

TEST_CASE("doctor's AppArmor finding") {
    CHECK_FALSE(judge_apparmor({"", "unconfined", "/usr/bin/gpubox"}).problem);
    CHECK_FALSE(judge_apparmor({"0", "unconfined", "/usr/bin/gpubox"}).problem);
    CHECK_FALSE(judge_apparmor({"1", "gpubox (unconfined)", "/usr/bin/gpubox"}).problem);
    const DoctorFinding f = judge_apparmor({"1", "unconfined", "/opt/x/gpubox"});
    CHECK(f.problem);
    CHECK_THAT(f.what, Catch::Matchers::Contains("\"/opt/x/gpubox\""));
    CHECK_THAT(f.fix, Catch::Matchers::Contains("apparmor_parser -r /etc/apparmor.d/gpubox"));
    CHECK_THAT(f.fix, Catch::Matchers::Contains("kernel.apparmor_restrict_unprivileged_userns=0"));
}

TEST_CASE("export; pull --squashfs; run --force-overlay") {
    Options o = parse({"export", "--overlay", "ov", "py", "lab/py2"});
    CHECK(o.command == Command::export_image);
    CHECK(o.exp.overlay == "ov");
    CHECK(o.exp.image == "py");
    CHECK(o.exp.target == "lab/py2");
    CHECK(parse({"export", "py", "./py.sqsh"}).exp.target == "./py.sqsh");
    CHECK_THROWS_AS(parse({"export", "py"}), UsageError);
    CHECK_THROWS_AS(parse({"export", "py", "a", "b"}), UsageError);
    CHECK_THROWS_AS(parse({"export", "--overlay=", "py", "a"}), UsageError);
    CHECK(parse({"pull", "--squashfs", "tar:x.tar"}).pull.squashfs);
    o = parse({"run", "--overlay", "ov", "--force-overlay", "py", "true"});
    CHECK(o.force_overlay);
    CHECK(o.overlay == "ov");
}
