// gpubox: parse, dispatch, map errors to exit codes. The only top-level catch.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "common/print.hpp"
#include "common/sys.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/commands/cdi.hpp"
#include "launcher/commands/commands.hpp"
#include "launcher/commands/image.hpp"
#include "launcher/ioi/box.hpp"
#include "launcher/monitor/run.hpp"
#include "launcher/sandbox/exit_codes.hpp"

namespace {

// A caller may start gpubox with fd 0, 1 or 2 closed (a daemon, `<&-`). The first fd gpubox
// opened would then be taken for that stream: its ROOTFS or a pipe of its own would reach the
// workload as stdin, or the monitor would read its own signalfd as the caller's stdin. So each
// closed one is /dev/null first, as the caller then meant: nothing in, nothing out.
bool open_std_fds() {
    for (int fd = 0; fd < 3; ++fd)
        if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF && ::open("/dev/null", O_RDWR) != fd)
            return false;
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace gpubox;
    using namespace gpubox::launcher;
    if (!open_std_fds()) return kExitSetupFailed;  // no /dev/null: nowhere even to say so
    const std::vector<std::string> args(argv + 1, argv + argc);
    // isolate mode: a symlink named isolate, or `gpubox isolate ...`; isolate's own exit codes,
    // and only isolate's lines on stderr (the program's too): no warning of gpubox's.
    const std::string self = argc > 0 ? argv[0] : "";
    const bool as_isolate = self.substr(self.rfind('/') + 1) == "isolate";
    if (as_isolate || (!args.empty() && args[0] == "isolate")) {
        log::set_level(log::Level::error);
        return ioi::isolate_main(
            as_isolate ? args : std::vector<std::string>(args.begin() + 1, args.end()));
    }
    try {
        Options o = parse_command_line(args);
        log::set_level(o.verbosity >= 2   ? log::Level::debug
                       : o.verbosity == 1 ? log::Level::info
                       : o.quiet          ? log::Level::error
                                          : log::Level::warn);
        switch (o.command) {
            case Command::help:
                print(o.help_topic.empty() ? usage_text() : command_help(o.help_topic));
                return 0;
            case Command::man: print(man_page()); return 0;
            case Command::version: print(version_text()); return 0;
            case Command::run: {
                RunRequest r;  // with a pulled image's hold: rmi leaves it alone while this runs
                r.options = resolve_run_image(o, &r.image_hold);
                r.options.named_image = o.rootfs;
                return run_sandbox(r);
            }
            case Command::pull: return pull_command(o);
            case Command::images: return images_command(o);
            case Command::rmi: return rmi_command(o);
            case Command::prune: return prune_command(o);
            case Command::export_image: return export_command(o);
            case Command::rootfs_create: return create_rootfs_command(o);
            case Command::list: return list_command(o);
            case Command::doctor: return doctor_command(o);
            case Command::check: return check_command(o);
            case Command::cdi_generate: return cdi_generate_command(o);
            case Command::cdi_list: return cdi_list_command(o);
            case Command::ps: return ps_command(o);
            case Command::exec: return exec_sandbox(o);
        }
    } catch (const UsageError&) {
        // The command line did not parse: still leave a verdict where --meta asked for one.
        write_usage_failure_meta(find_meta_path(args), describe(std::current_exception()));
        log::error(describe(std::current_exception()));
    } catch (...) {
        const auto e = std::current_exception();
        log::error(describe(e));
        const std::string hint = hint_for(e);
        if (!hint.empty()) log::hint(hint);
    }
    return kExitSetupFailed;
}
