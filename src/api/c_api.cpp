// PLACEHOLDER — replaced by the C ABI work (include/flashcore/flashcore.h).
