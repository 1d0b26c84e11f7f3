// image/: source references, default names, OCI documents, the failure text of a pull, the
// skopeo command line, and what `run IMAGE` takes from the image's config.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "image/oci.hpp"
#include "image/pull.hpp"
#include "image/reference.hpp"
#include "image/run_config.hpp"
#include "image/tool_error.hpp"
#include "launcher/commands/image.hpp"

using namespace gpubox;
using namespace gpubox::image;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {
const std::string kHex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
}

TEST_CASE("docker:// references: host, port, repository, tag, digest") {
    Source s = parse_source("docker://h:5000/lab/cuda:12");
    CHECK(s.kind == Source::Kind::docker);
    CHECK(s.host == "h:5000");
    CHECK(s.repo == "lab/cuda");
    CHECK(s.tag == "12");
    s = parse_source("docker://registry.example.org/library/ubuntu");
    CHECK(s.host == "registry.example.org");
    CHECK(s.repo == "library/ubuntu");
    CHECK(s.tag.empty());
    s = parse_source("docker://h:5000/x/y@sha256:" + kHex);
    CHECK(s.digest == "sha256:" + kHex);
    CHECK(s.repo == "x/y");
}

TEST_CASE("bad sources are UsageErrors that say what is wrong") {
    CHECK_THROWS_WITH(parse_source("ubuntu:22.04"), Contains("unknown transport"));
    CHECK_THROWS_WITH(parse_source("docker://h:5000"), Contains("docker://HOST"));
    CHECK_THROWS_WITH(parse_source("docker:h/x"), Contains("docker://HOST/REPO"));
    CHECK_THROWS_WITH(parse_source("docker://h/x@sha256:abc"), Contains("64 lower-case hex"));
    CHECK_THROWS_WITH(parse_source("docker://h/X/Y:1"), Contains("invalid repository"));
    CHECK_THROWS_WITH(parse_source("docker://h/x:bad/tag:"), Contains("invalid"));
    CHECK_THROWS_WITH(parse_source("docker://h/../x:1"), Contains("invalid repository"));
    CHECK_THROWS_WITH(parse_source("tar:"), Contains("missing a path"));
    CHECK_THROWS_AS(parse_source("oci:/x:bad tag"), UsageError);
}

TEST_CASE("archives and layouts: the path, and oci:DIR:TAG's tag") {
    CHECK(parse_source("docker-archive:/a/b.tar").path == "/a/b.tar");
    CHECK(parse_source("oci-archive:x.tar").kind == Source::Kind::oci_archive);
    const Source o = parse_source("oci:/srv/layouts/app:v2");
    CHECK(o.path == "/srv/layouts/app");
    CHECK(o.tag == "v2");
    CHECK(
        parse_source("oci:/srv/lay:outs/app").tag.empty());  // a ':' followed by '/' is the path's
    CHECK(skopeo_source(parse_source("oci:rel/app:v2"), "/home/u") == "oci:/home/u/rel/app:v2");
    CHECK(skopeo_source(parse_source("docker-archive:/a.tar"), "/x") == "docker-archive:/a.tar");
    CHECK(skopeo_source(parse_source("docker://h/x:1"), "/x") == "docker://h/x:1");
}

TEST_CASE("a SOURCE without a transport that names a host is docker://, as podman reads it") {
    const Source s = parse_source("127.0.0.1:5000/lab/py:1");
    CHECK(s.kind == Source::Kind::docker);
    CHECK(s.text == "docker://127.0.0.1:5000/lab/py:1");
    CHECK(s.host == "127.0.0.1:5000");
    CHECK(s.repo == "lab/py");
    CHECK(s.tag == "1");
    CHECK(parse_source("reg.example/x").host == "reg.example");
    CHECK(parse_source("localhost/x").kind == Source::Kind::docker);
    for (const char* bad : {"ubuntu", "lab/py", "./py.tar", "../x/y"})
        CHECK_THROWS_WITH(parse_source(bad), Contains("unknown transport"));
}

TEST_CASE("default names") {
    CHECK(default_name(parse_source("docker://h:5000/lab/cuda:12")) == "cuda:12");
    CHECK(default_name(parse_source("docker://h:5000/lab/cuda")) == "cuda:latest");
    CHECK(default_name(parse_source("docker://h/lab/cuda@sha256:" + kHex)) ==
          "cuda@sha256:0123456789ab");
    CHECK(default_name(parse_source("docker-archive:/x/deb.tar")) == "deb");
    CHECK(default_name(parse_source("oci-archive:/x/app.oci.tar.gz")) == "app");
    CHECK(default_name(parse_source("tar:rootfs.tgz")) == "rootfs");
    CHECK(default_name(parse_source("oci:/x/layout/")) == "layout");
    CHECK(default_name(parse_source("oci:/x/layout:v1")) == "layout:v1");
}

TEST_CASE("names: '/' between parts, no '..', printable, not hidden") {
    for (const char* ok :
         {"cuda:12", "a", "x@sha256:0123456789ab", "my_img-1.0+b", "lab/py", "a/b/c:1"})
        CHECK(valid_name(ok));
    for (const char* bad : {"", "/a", "a/", "a//b", "a/.b", "a/-b", "..", "a..b", ".hidden",
                            "-flag", "a b", "tab\t", "\xc3\xa9"})
        CHECK_FALSE(valid_name(bad));
    CHECK(!valid_name(std::string(129, 'a')));
    CHECK_THROWS_WITH(validate_name("../x"), StartsWith("invalid image name \"../x\""));
}

TEST_CASE("image config: the fields gpubox honours") {
    const Config c = parse_config(R"({"architecture":"amd64","os":"linux","config":{
        "Env":["PATH=/usr/bin","CUDA_VERSION=12.4.0"],"WorkingDir":"/w","Entrypoint":["/e"],
        "Cmd":["a","b"],"User":"1000"},"rootfs":{"type":"layers","diff_ids":[]}})");
    CHECK(c.env == std::vector<std::string>{"PATH=/usr/bin", "CUDA_VERSION=12.4.0"});
    CHECK(c.working_dir == "/w");
    CHECK(c.entrypoint == std::vector<std::string>{"/e"});
    CHECK(c.cmd == std::vector<std::string>{"a", "b"});
    CHECK(c.user == "1000");
    CHECK(c.os == "linux");
    CHECK(c.architecture == "amd64");
    const Config empty = parse_config(R"({"config":{"Env":null,"Cmd":null}})");
    CHECK(empty.env.empty());
    CHECK(empty.cmd.empty());
    CHECK(parse_config(R"({"architecture":"arm64"})").architecture == "arm64");
    CHECK_THROWS_WITH(parse_config(R"({"config":{"Env":"PATH=/x"}})"),
                      Contains("Env is not a list"));
    CHECK_THROWS_WITH(parse_config(R"({"config":{"Cmd":[1]}})"), Contains("Cmd is not a list"));
    CHECK_THROWS_AS(parse_config("[]"), std::runtime_error);
    CHECK(parse_config(render_config(c)).cmd == c.cmd);
}

TEST_CASE("manifests and index.json") {
    const std::string d = "sha256:" + kHex;
    const Manifest m =
        parse_manifest(R"({"schemaVersion":2,"config":{"digest":")" + d + R"(","size":5},
        "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")" +
                       d + R"(","size":7}]})");
    CHECK(m.config.size == 5);
    REQUIRE(m.layers.size() == 1);
    CHECK(m.layers[0].size == 7);
    CHECK(parse_index(R"({"manifests":[{"digest":")" + d + R"(","size":9}]})").digest == d);
    CHECK_THROWS_WITH(parse_index(R"({"manifests":[]})"), Contains("exactly one"));
    CHECK_THROWS_WITH(
        parse_manifest(
            R"({"schemaVersion":2,"config":{"digest":"sha512:00","size":1},"layers":[]})"),
        Contains("only sha256"));
    CHECK_THROWS_WITH(parse_manifest(R"({"schemaVersion":2,"manifests":[],"layers":[]})"),
                      Contains("an index"));
    CHECK_THROWS_WITH(
        parse_manifest(R"({"schemaVersion":2,"config":{"digest":")" + d + R"(","size":5},
        "layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip+encrypted","digest":")" +
                       d + R"(","size":7}]})"),
        Contains("encrypted"));
    CHECK(valid_digest(d));
    CHECK_FALSE(valid_digest("sha256:" + kHex.substr(1) + "G"));
    CHECK_FALSE(valid_digest("sha256:../../etc/passwd"));
}

TEST_CASE("skopeo's failures become one line a user can act on") {
    const Source s = parse_source("docker://127.0.0.1:5000/lab/x:1");
    const auto explain = [&](const std::string& err) { return explain_pull_failure(s, err); };
    CHECK(explain("time=\"..\" level=fatal msg=\"initializing source "
                  "docker://127.0.0.1:5000/lab/x:1: reading manifest 1 in "
                  "127.0.0.1:5000/lab/x: unauthorized: authentication required\"\n") ==
          "authentication failed (check --creds, --authfile or the registry login in "
          "~/.config/containers/auth.json)");
    CHECK(explain("msg=\"reading manifest nope in 127.0.0.1:5000/lab/x: manifest unknown: manifest "
                  "unknown\"") == "no such image/tag");
    CHECK_THAT(explain("msg=\"pinging container registry 127.0.0.1:5000: Get "
                       "\\\"https://127.0.0.1:5000/v2/\\\": dial tcp "
                       "127.0.0.1:5000: connect: connection refused\""),
               StartsWith("cannot connect to 127.0.0.1:5000 (") &&
                   Contains("\"https://127.0.0.1:5000/v2/\""));
    CHECK_THAT(
        explain("writing blob: Digest did not match, expected sha256:" + kHex + ", got sha256:00"),
        StartsWith("digest mismatch") && Contains("expected sha256:0123456789ab"));
    CHECK_THAT(explain("x509: certificate signed by unknown authority"),
               StartsWith("TLS: the certificate of 127.0.0.1:5000 is not trusted") &&
                   Contains("--cert-dir"));
    CHECK_THAT(explain("http: server gave HTTP response to HTTPS client"), Contains("--insecure"));
    CHECK_THAT(explain("no image found in manifest list for architecture arm64"),
               Contains("--platform"));
    // A digest's hex digits are not status codes.
    CHECK(explain("unknown blob sha256:401404") == "unknown blob sha256:401404");
    CHECK(explain_pull_failure(parse_source("docker://reg.example/x"),
                               "dial tcp: lookup reg.example: no such host")
              .rfind("cannot connect to reg.example:443", 0) == 0);
    CHECK(last_line("one\ntwo\x1b[31m\n\n") == "two [31m");
    CHECK(last_line(std::string(400, 'x')).size() == 303);
}

TEST_CASE("the skopeo command line") {
    PullRequest r;
    r.insecure = true, r.cert_dir = "/c", r.platform = "linux/arm64/v8";
    const auto a =
        plan_skopeo_args(r, "docker://h/x:1", "/s/tmp/p/layout", "/s/tmp/p/auth.json", false);
    CHECK(a == std::vector<std::string>{"skopeo", "copy", "--remove-signatures", "--quiet",
                                        "--src-tls-verify=false", "--src-cert-dir", "/c",
                                        "--src-authfile", "/s/tmp/p/auth.json", "--override-os",
                                        "linux", "--override-arch", "arm64", "--override-variant",
                                        "v8", "docker://h/x:1", "oci:/s/tmp/p/layout:gpubox"});
    const auto b = plan_skopeo_args(PullRequest{}, "oci-archive:/a.tar", "/l", "", true);
    CHECK(b == std::vector<std::string>{"skopeo", "copy", "--remove-signatures",
                                        "oci-archive:/a.tar", "oci:/l:gpubox"});
}

TEST_CASE("re-pull: the registry's manifest alone, and the index entry for the platform") {
    PullRequest r;
    r.cert_dir = "/c";
    CHECK(plan_inspect_args(r, "docker://h/x:1", "/a.json") ==
          std::vector<std::string>{"skopeo", "inspect", "--raw", "--tls-verify=true", "--cert-dir",
                                   "/c", "--authfile", "/a.json", "docker://h/x:1"});
    r = {};
    r.insecure = true;
    CHECK(plan_inspect_args(r, "docker://h/x:1", "") ==
          std::vector<std::string>{"skopeo", "inspect", "--raw", "--tls-verify=false",
                                   "docker://h/x:1"});
    const std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b'),
                      c = "sha256:" + std::string(64, 'c');
    const auto entry = [](const std::string& d, const std::string& arch, const std::string& v) {
        return "{\"digest\": \"" + d + "\", \"size\": 1, \"platform\": {\"os\": \"linux\", " +
               "\"architecture\": \"" + arch + "\"" +
               (v.empty() ? "" : ", \"variant\": \"" + v + "\"") + "}}";
    };
    const std::string index = "{\"manifests\": [" + entry(a, "amd64", "") + ", " +
                              entry(b, "arm64", "v8") + ", " + entry(c, "arm", "v7") + ", " +
                              entry(a, "arm", "v6") + "]}";
    CHECK(is_index(index));
    CHECK_FALSE(is_index(R"({"layers": []})"));
    CHECK(pick_platform(index, "linux", "amd64", "") == a);
    CHECK(pick_platform(index, "linux", "arm64", "") == b);
    CHECK(pick_platform(index, "linux", "arm", "v7") == c);
    CHECK(pick_platform(index, "linux", "arm", "") == "");  // two: skopeo's rule decides
    CHECK(pick_platform(index, "linux", "s390x", "") == "");
    CHECK(pick_platform(index, "windows", "amd64", "") == "");
    CHECK(pick_platform(R"({"layers": []})", "linux", "amd64", "") == "");
}

TEST_CASE("translate_config: docker's rules for Env, WorkingDir, Entrypoint and Cmd, pure") {
    Stored img;
    img.name = "cuda:12";
    img.rootfs = "/store/blobs/sha256/x/rootfs";
    img.config.env = {"PATH=/opt/bin", "=bad", "novalue", "NVIDIA_DRIVER_CAPABILITIES=compute"};
    img.config.working_dir = "/app//";
    img.config.entrypoint = {"/entry"};
    img.config.cmd = {"default"};
    RunConfig r = translate_config(img, {{{"B", "cli"}}, false, {}});
    CHECK(r.rootfs == "/store/blobs/sha256/x/rootfs");
    CHECK(r.env ==
          std::vector<std::pair<std::string, std::string>>{
              {"PATH", "/opt/bin"}, {"NVIDIA_DRIVER_CAPABILITIES", "compute"}, {"B", "cli"}});
    CHECK(r.workdir == std::optional<std::string>("/app"));
    CHECK(r.argv == std::vector<std::string>{"/entry", "default"});
    CHECK(r.driver_capabilities == "compute");
    r = translate_config(img, {{}, true, {"x"}});  // --workdir given, CMD given
    CHECK_FALSE(r.workdir);
    CHECK(r.argv == std::vector<std::string>{"/entry", "x"});
    img.config.working_dir = "/w/../app";
    CHECK_THROWS_WITH(translate_config(img, {}), Contains("image cuda:12: WorkingDir"));
    img.config.working_dir.clear(), img.config.entrypoint.clear(), img.config.cmd.clear();
    CHECK_THROWS_WITH(translate_config(img, {}), Contains("has no Entrypoint or Cmd"));
}

TEST_CASE("run IMAGE: the image's config under the command line's") {
    launcher::Options o;
    o.rootfs = "cuda:12";
    o.env = {{"B", "cli"}};
    Stored img;
    img.name = "cuda:12";
    img.rootfs = "/store/blobs/sha256/x/rootfs";
    img.config.env = {"PATH=/opt/bin",
                      "B=image",
                      "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video",
                      "NVIDIA_VISIBLE_DEVICES=all",
                      "=bad",
                      "novalue"};
    img.config.working_dir = "/app//";
    img.config.entrypoint = {"/entry"};
    img.config.cmd = {"default"};
    launcher::Options r = launcher::apply_image_config(o, img);
    CHECK(r.rootfs == "/store/blobs/sha256/x/rootfs");
    REQUIRE(r.env.size() == 5);
    CHECK(r.env[0] == std::pair<std::string, std::string>{"PATH", "/opt/bin"});
    CHECK(r.env.back() == std::pair<std::string, std::string>{"B", "cli"});  // later wins
    CHECK(r.workdir == "/app");
    CHECK(r.argv == std::vector<std::string>{"/entry", "default"});
    CHECK(r.gpu_caps == gpu::parse_capabilities("compute,utility,video"));
    CHECK(gpu::to_string(r.gpu) == "none");  // NVIDIA_VISIBLE_DEVICES never selects a GPU
    img.config.working_dir = "/w/../app";
    CHECK_THROWS_WITH(launcher::apply_image_config(o, img), Contains("WorkingDir"));
    img.config.working_dir = "/app";
    o.argv = {"x", "y"};
    o.workdir = "/cli", o.workdir_given = true;
    o.gpu_caps = gpu::parse_capabilities("utility"), o.gpu_caps_given = true;
    r = launcher::apply_image_config(o, img);
    CHECK(r.argv == std::vector<std::string>{"/entry", "x", "y"});
    CHECK(r.workdir == "/cli");
    CHECK(r.gpu_caps == gpu::parse_capabilities("utility"));
    img.config.entrypoint.clear(), img.config.cmd.clear();
    o.argv.clear();
    CHECK_THROWS_WITH(launcher::apply_image_config(o, img), Contains("has no Entrypoint or Cmd"));
    img.config.env = {"NVIDIA_DRIVER_CAPABILITIES=bogus"};
    o.argv = {"x"}, o.gpu_caps_given = false, o.gpu_caps = 3;
    CHECK(launcher::apply_image_config(o, img).gpu_caps == 3);  // warned, default kept
}

TEST_CASE("run ROOTFS: a path is a directory, with no store lookup; CMD is then required") {
    launcher::Options o;
    o.rootfs = "/nonexistent/dir";
    CHECK_THROWS_WITH(launcher::resolve_run_image(o), Contains("missing CMD"));
    o.argv = {"true"};
    CHECK(launcher::resolve_run_image(o).rootfs == "/nonexistent/dir");
}
