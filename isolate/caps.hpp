#pragma once

namespace gpubox::isolate {

// Child side: empty effective, permitted, inheritable, ambient and bounding sets (raw calls),
// then no_new_privs, so no later execve can gain anything back.
void drop_all_privileges();

}  // namespace gpubox::isolate
