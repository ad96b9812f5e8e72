// Shared main for the test executables: prints the build and, once, whether a GPU is present.
#include <cstdio>

#include <gtest/gtest.h>

#include "flashcore/flashcore.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::printf("%s\n", flashcore::build_info().c_str());
  return RUN_ALL_TESTS();
}
