#pragma once
// How many C++ exceptions this process has thrown so far (tests/unit/throw_count.cpp).
long throws_so_far();
