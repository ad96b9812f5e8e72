/* flashcore's exported symbols. The library is built with hidden visibility (CMakeLists.txt), so only
 * what the public headers mark FLASHCORE_API is visible from libflashcore.so: the C++ API, the C ABI
 * and the softmax entry points, never the kernels or the internal namespaces. */
#ifndef FLASHCORE_EXPORT_H_
#define FLASHCORE_EXPORT_H_

#if defined(_WIN32)
#define FLASHCORE_API
#else
#define FLASHCORE_API __attribute__((visibility("default")))
#endif

#endif /* FLASHCORE_EXPORT_H_ */
