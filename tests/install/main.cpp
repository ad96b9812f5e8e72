// Links against an installed flashcore and checks both headers resolve and agree.
#include <cstdio>
#include <cstring>

#include <flashcore/flashcore.h>
#include <flashcore/flashcore.hpp>

int main() {
  const std::string cpp = flashcore::build_info();
  std::printf("%s\n", cpp.c_str());
  return cpp == fc_build_info() && cpp.rfind("flashcore ", 0) == 0 ? 0 : 1;
}
