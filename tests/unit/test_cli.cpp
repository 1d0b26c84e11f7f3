#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "launcher/cli.hpp"

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
    Options o = parse({"run", "--bind", "/a:/b", "--ro-bind", "/c", "--tmpfs", "/t", "--env", "A=1",
                       "--env", "B=x=y", "r", "cmd"});
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
    CHECK_THROWS_WITH(parse({"run", "r"}), Contains("missing CMD"));
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
    auto [text, bytes] = GENERATE(table<std::string, std::uint64_t>({
        {"4096", 4096}, {"64K", 64ULL << 10}, {"256M", 256ULL << 20}, {"2G", 2ULL << 30},
        {"3MiB", 3ULL << 20}}));
    CHECK(parse_size(text, "x") == bytes);
}

TEST_CASE("parse_size rejects junk") {
    auto text = GENERATE(as<std::string>{}, "", "M", "12X", "-1", "0", "1.5G", "99999999999999999G");
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
