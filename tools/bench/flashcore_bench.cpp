// PLACEHOLDER — flashcore-bench.
#include <cstdio>
#include "flashcore/flashcore.hpp"
int main() { std::printf("%s\n", flashcore::build_info().c_str()); return 0; }
