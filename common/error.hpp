#pragma once
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "common/syscall.hpp"

namespace gpubox {

// Bad command-line input: exit 125.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// An impossible or inconsistent request, found before anything ran: exit 125.
struct PlanError : std::runtime_error {
    explicit PlanError(const std::string& what, std::string hint_text = {})
        : std::runtime_error(what), hint(std::move(hint_text)) {}
    std::string hint;
};

// The kernel refused. `call`, `err` and `path` are what hints match on (see hint_for); `op` is
// the text of the call for the message ("mount(\"a\" -> \"b\")"), free to be reworded.
struct SysError : std::system_error {
    SysError(Syscall call_id, int err, const std::string& op_text, std::string path_text = {})
        : std::system_error(err, std::generic_category(), op_text),
          op(op_text),
          call(call_id),
          path(std::move(path_text)) {}
    // For a call site that gives only the text ("openat2(root, \"/x\", ...)"): the syscall is
    // the name before its '(' and the path its first quoted argument.
    SysError(int err, const std::string& op_text)
        : SysError(syscall_of_op_text(op_text), err, op_text, path_of_op_text(op_text)) {}
    std::string op;
    Syscall call = Syscall::unknown;
    std::string path;  // the path the call named (or the filesystem type, for fs*), else ""
    int err() const { return code().value(); }

    static Syscall syscall_of_op_text(const std::string& op_text);
    static std::string path_of_op_text(const std::string& op_text);
};

// A context frame ("mount step 3/19 (...)"), always thrown with std::throw_with_nested.
struct SetupError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The exec of the workload failed: 126 (cannot execute) or 127 (not found).
struct ExecError : std::runtime_error {
    ExecError(const std::string& what, int exit_code) : std::runtime_error(what), code(exit_code) {}
    int code;
};

// "frame: frame: op(args): reason", walking nested exceptions outermost first.
std::string describe(const std::exception_ptr& error);

// One extra line of advice for well-known failures, or "" when there is none.
std::string hint_for(const std::exception_ptr& error);

// The innermost SysError in a nested chain, or nullptr.
const SysError* innermost_sys_error(const std::exception& e);

}  // namespace gpubox
