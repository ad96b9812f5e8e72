// flashcore._C — the Python extension, free of any framework.
//
// Tensors cross this boundary as raw addresses (Python ints), with sizes and strides in elements,
// and the CUDA stream as an integer handle. Python fills an `AttentionParams` and calls `forward`;
// the C++ API validates, dispatches and runs. Errors come back as exceptions carrying the C++
// message verbatim:
//   kInvalidArgument -> flashcore._C.InvalidArgumentError (a ValueError and a RuntimeError: flash-attn
//                       users catch RuntimeError)
//   kUnsupported     -> flashcore._C.UnsupportedError (a NotImplementedError, so a RuntimeError):
//                       a valid call that no kernel path runs
//   anything else    -> RuntimeError
// Host addresses (numpy arrays, CPU tensors) run the fp64 CPU reference; device addresses run on
// the given stream.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "flashcore/flashcore.hpp"
#include "flashcore/softmax.hpp"

namespace py = pybind11;
using flashcore::AttentionParams;
using flashcore::DType;
using flashcore::KernelPath;
using flashcore::MaskAlign;
using flashcore::Status;
using flashcore::StatusCode;

namespace {

// The Python type of "valid call, but no kernel path of this build/device computes it". Created
// once at import and kept for the life of the process (module attribute holds a reference too).
PyObject* g_unsupported_error = nullptr;
// The Python type of "the call breaks a rule of the API" (ValueError and RuntimeError).
PyObject* g_invalid_argument_error = nullptr;

// Sets the Python error for a failed status and returns nullptr (CPython's "an exception is set").
// The calls that can fail are plain CPython functions (below) rather than pybind11 lambdas, so an
// error reaches Python without a C++ exception crossing any frame.
PyObject* set_error(const Status& status) {
  PyObject* type = PyExc_RuntimeError;
  if (status.code == StatusCode::kInvalidArgument) type = g_invalid_argument_error;
  if (status.code == StatusCode::kUnsupported) type = g_unsupported_error;
  PyErr_SetString(type, status.message.c_str());
  return nullptr;
}

// The slow-path warning (flashcore.hpp, SlowPathPolicy) of a call made from Python: the C++ handler
// runs on the calling thread with the GIL released, so it only records the message; the binding
// raises it as a flashcore.SlowPathWarning once the call has returned and the GIL is held again.
PyObject* g_slow_path_warning = nullptr;
thread_local std::string t_pending_warning;
void record_slow_path_warning(const char* message) { t_pending_warning = message; }

// After a call (GIL held): false when the warning became an exception (a warnings filter "error").
bool emit_pending_warning() {
  if (t_pending_warning.empty()) return true;
  std::string message;
  message.swap(t_pending_warning);
  return PyErr_WarnEx(g_slow_path_warning, message.c_str(), 2) == 0;
}

// Runs call() (a Status-returning C++ API call) with the GIL released (the CPU reference can take a
// while, and validation may copy cu_seqlens from the device), then returns None, or nullptr with the
// Python error set for a failed status or a slow-path warning turned into an exception.
template <class Call>
PyObject* run_released(Call&& call) {
  Status status;
  Py_BEGIN_ALLOW_THREADS
  status = call();
  Py_END_ALLOW_THREADS
  if (!status.ok()) return set_error(status);
  if (!emit_pending_warning()) return nullptr;
  Py_RETURN_NONE;
}

// Reads (params[, stream]) of forward/validate; false with a TypeError set when they do not parse.
bool parse_params(PyObject* args, PyObject* kwargs, const AttentionParams** params, cudaStream_t* stream,
                  bool with_stream) {
  static const char* kwlist_stream[] = {"params", "stream", nullptr};
  static const char* kwlist[] = {"params", nullptr};
  PyObject* params_obj = nullptr;
  unsigned long long stream_handle = 0;
  const bool parsed =
      with_stream ? PyArg_ParseTupleAndKeywords(args, kwargs, "O|K", const_cast<char**>(kwlist_stream), &params_obj,
                                                &stream_handle)
                  : PyArg_ParseTupleAndKeywords(args, kwargs, "O", const_cast<char**>(kwlist), &params_obj);
  if (!parsed) return false;
  const py::handle handle(params_obj);
  if (!py::isinstance<AttentionParams>(handle)) {
    PyErr_SetString(PyExc_TypeError, "params: expected flashcore._C.AttentionParams");
    return false;
  }
  *params = &handle.cast<const AttentionParams&>();
  *stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream_handle));
  return true;
}

// set_forward_overrides(overrides or None): the sm90 plan overrides (flashcore::ForwardOverrides)
// every later forward() / forward_dense() call of this process gets, until reset with None. For
// tests and tuning runs only; nothing reads them from the environment.
flashcore::ForwardOverrides g_overrides;
bool g_has_overrides = false;
const flashcore::ForwardOverrides* active_overrides() { return g_has_overrides ? &g_overrides : nullptr; }

// forward(params, stream=0): flashcore::attention_forward (run_released).
PyObject* py_forward(PyObject*, PyObject* args, PyObject* kwargs) {
  const AttentionParams* params = nullptr;
  cudaStream_t stream = nullptr;
  if (!parse_params(args, kwargs, &params, &stream, true)) return nullptr;
  AttentionParams call = *params;
  call.overrides = active_overrides();
  return run_released([&] { return flashcore::attention_forward(call, stream); });
}

// The dense call's arguments shared by forward_dense and backward_dense, args[0 .. kDenseArgs):
//   q, k, v, o, lse, B, Sq, Hq, Dqk, Sk, Hkv, Dv, q strides (3), k strides (3), v strides (3),
//   softmax_scale, softcap, dtype, causal, mask_align, window_left, window_right, path.
// Addresses are ints; strides are (batch, seq, head) in elements; o is contiguous [B, Sq, Hq, Dv] and
// lse contiguous [B, Hq, Sq] (lse may be 0). Fills `p`; false with a Python error set when an
// argument does not convert or does not fit the field it fills.
constexpr Py_ssize_t kDenseArgs = 29;

bool parse_dense_call(PyObject* const* args, AttentionParams* out) {
  constexpr Py_ssize_t kScaleArg = 21, kSoftcapArg = 22;  // the two floats; every other argument is an int
  long long ints[kDenseArgs] = {};
  double floats[kDenseArgs] = {};
  for (Py_ssize_t i = 0; i < kDenseArgs; ++i) {
    if (i == kScaleArg || i == kSoftcapArg) {
      floats[i] = PyFloat_AsDouble(args[i]);
    } else if (i < 5) {
      ints[i] = (long long)PyLong_AsUnsignedLongLong(args[i]);  // addresses
    } else {
      ints[i] = PyLong_AsLongLong(args[i]);
    }
    if (PyErr_Occurred()) return false;
  }
  // Sizes that do not fit an int would wrap below: refuse them here (validate() sees only ints).
  for (int i = 5; i <= 11; ++i) {
    if (ints[i] < 0 || ints[i] > INT32_MAX) {
      PyErr_Format(g_invalid_argument_error, "dense call: size argument %d out of range: %lld", i, ints[i]);
      return false;
    }
  }
  for (int i = 26; i <= 27; ++i) {
    if (ints[i] < INT32_MIN || ints[i] > INT32_MAX) {
      PyErr_Format(g_invalid_argument_error, "window_size: each bound must fit a 32-bit int (-1 = unbounded), got %lld", ints[i]);
      return false;
    }
  }
  auto address = [&](int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(ints[i])); };
  AttentionParams& p = *out;
  p = AttentionParams{};
  p.q = address(0), p.k = address(1), p.v = address(2), p.o = address(3);
  p.lse = static_cast<float*>(address(4));
  p.batch = (int)ints[5], p.seqlen_q = (int)ints[6], p.heads_q = (int)ints[7], p.head_dim_qk = (int)ints[8];
  p.seqlen_k = (int)ints[9], p.heads_kv = (int)ints[10], p.head_dim_v = (int)ints[11];
  flashcore::set_dense_strides(p);  // o and lse are contiguous; q, k, v take the given strides below
  p.q_batch_stride = ints[12], p.q_seq_stride = ints[13], p.q_head_stride = ints[14];
  p.k_batch_stride = ints[15], p.k_seq_stride = ints[16], p.k_head_stride = ints[17];
  p.v_batch_stride = ints[18], p.v_seq_stride = ints[19], p.v_head_stride = ints[20];
  p.softmax_scale = (float)floats[kScaleArg], p.softcap = (float)floats[kSoftcapArg];
  p.dtype = static_cast<DType>(ints[23]);
  p.causal = ints[24] != 0;
  p.mask_align = static_cast<MaskAlign>(ints[25]);
  p.window_left = (int)ints[26], p.window_right = (int)ints[27];
  p.path = static_cast<KernelPath>(ints[28]);
  return true;
}

// dout, dq, dk, dv of `bp` from (address, batch stride, seq stride, head stride) each, in that order.
void set_gradients(flashcore::BackwardParams& bp, const int64_t (&g)[16]) {
  auto address = [&](int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(g[i])); };
  bp.dout = address(0);
  bp.dout_batch_stride = g[1], bp.dout_seq_stride = g[2], bp.dout_head_stride = g[3];
  bp.dq = address(4);
  bp.dq_batch_stride = g[5], bp.dq_seq_stride = g[6], bp.dq_head_stride = g[7];
  bp.dk = address(8);
  bp.dk_batch_stride = g[9], bp.dk_seq_stride = g[10], bp.dk_head_stride = g[11];
  bp.dv = address(12);
  bp.dv_batch_stride = g[13], bp.dv_seq_stride = g[14], bp.dv_head_stride = g[15];
}

// A stream handle (an int) as a cudaStream_t; false with a Python error set when it does not convert.
bool parse_stream(PyObject* arg, cudaStream_t* stream) {
  const unsigned long long handle = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return false;
  *stream = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(handle));
  return true;
}

// forward_dense(<the dense call's 29 arguments>, stream): forward() of a dense flash-attn-layout call
// whose AttentionParams is filled here instead of attribute by attribute from Python (the torch op's
// eager path: tens of microseconds of host time per call less). The caller (python/flashcore/ops.py)
// has checked what AttentionParams cannot express (k and v agree on batch and heads, last dimensions
// contiguous); validate() checks the rest.
PyObject* py_forward_dense(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr Py_ssize_t kArgs = kDenseArgs + 1;
  if (nargs != kArgs) {
    PyErr_Format(PyExc_TypeError, "forward_dense: expected %d arguments, got %zd", (int)kArgs, nargs);
    return nullptr;
  }
  AttentionParams p;
  cudaStream_t stream = nullptr;
  if (!parse_dense_call(args, &p) || !parse_stream(args[kDenseArgs], &stream)) return nullptr;
  p.overrides = active_overrides();
  return run_released([&] { return flashcore::attention_forward(p, stream); });
}

// backward_dense(<the dense call's 29 arguments, o and lse as the forward wrote them>, dout, dq, dk,
// dv (each: address, batch stride, seq stride, head stride), deterministic, stream):
// attention_backward of a dense call, its BackwardParams filled here (the torch op's eager backward:
// the same host-time saving as forward_dense). validate_backward() checks everything.
PyObject* py_backward_dense(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr Py_ssize_t kGradArgs = 16, kArgs = kDenseArgs + kGradArgs + 2;
  if (nargs != kArgs) {
    PyErr_Format(PyExc_TypeError, "backward_dense: expected %d arguments, got %zd", (int)kArgs, nargs);
    return nullptr;
  }
  flashcore::BackwardParams bp;
  if (!parse_dense_call(args, &bp.forward)) return nullptr;
  int64_t grad[kGradArgs] = {};
  for (Py_ssize_t i = 0; i < kGradArgs; ++i) {
    grad[i] = i % 4 == 0 ? int64_t(PyLong_AsUnsignedLongLong(args[kDenseArgs + i]))  // the addresses
                         : int64_t(PyLong_AsLongLong(args[kDenseArgs + i]));
    if (PyErr_Occurred()) return nullptr;
  }
  const int deterministic = PyObject_IsTrue(args[kDenseArgs + kGradArgs]);
  cudaStream_t stream = nullptr;
  if (deterministic < 0 || !parse_stream(args[kDenseArgs + kGradArgs + 1], &stream)) return nullptr;
  set_gradients(bp, grad);
  bp.deterministic = deterministic != 0;
  return run_released([&] { return flashcore::attention_backward(bp, stream); });
}

// validate(params, stream=0): flashcore::validate; writes nothing.
PyObject* py_validate(PyObject*, PyObject* args, PyObject* kwargs) {
  const AttentionParams* params = nullptr;
  cudaStream_t stream = nullptr;
  if (!parse_params(args, kwargs, &params, &stream, true)) return nullptr;
  return run_released([&] { return flashcore::validate(*params, stream); });
}

// select_path(params): the KernelPath forward() would run, or UnsupportedError.
PyObject* py_select_path(PyObject*, PyObject* args, PyObject* kwargs) {
  const AttentionParams* params = nullptr;
  cudaStream_t unused = nullptr;
  if (!parse_params(args, kwargs, &params, &unused, false)) return nullptr;
  KernelPath chosen = KernelPath::kAuto;
  const Status status = flashcore::select_path(*params, &chosen);
  if (!status.ok()) return set_error(status);
  return py::cast(chosen).release().ptr();
}

// softmax_forward(x, y, lse, rows, cols, dtype, variant=0, stream=0): flashcore::softmax_forward on
// raw addresses (lse may be 0). Row-major [rows, cols], contiguous rows.
PyObject* py_softmax_forward(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"x", "y", "lse", "rows", "cols", "dtype", "variant", "stream", nullptr};
  unsigned long long x = 0, y = 0, lse = 0, stream_handle = 0;
  long long rows = 0, cols = 0;
  int dtype = 0, variant = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KKKLLi|iK", const_cast<char**>(kwlist), &x, &y, &lse, &rows,
                                   &cols, &dtype, &variant, &stream_handle)) {
    return nullptr;
  }
  return run_released([&] {
    return flashcore::softmax_forward(reinterpret_cast<const void*>(static_cast<uintptr_t>(x)),
                                      reinterpret_cast<void*>(static_cast<uintptr_t>(y)),
                                      reinterpret_cast<float*>(static_cast<uintptr_t>(lse)), rows, cols,
                                      static_cast<DType>(dtype), static_cast<flashcore::SoftmaxVariant>(variant),
                                      reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(stream_handle)));
  });
}

PyMethodDef g_status_methods[] = {
    {"softmax_forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_softmax_forward)),
     METH_VARARGS | METH_KEYWORDS,
     "softmax_forward(x, y, lse, rows, cols, dtype, variant=0, stream=0)\n\nflashcore::softmax_forward over "
     "[rows, cols] row-major memory (addresses as ints, lse may be 0). Host addresses run the fp64 CPU path."},
    {"forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_forward)),
     METH_VARARGS | METH_KEYWORDS,
     "forward(params, stream=0)\n\nflashcore::attention_forward on the given CUDA stream handle (0 = legacy "
     "default stream). Raises ValueError / UnsupportedError / RuntimeError with the C++ message."},
    {"forward_dense", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_forward_dense)), METH_FASTCALL,
     "forward_dense(q, k, v, o, lse, B, Sq, Hq, Dqk, Sk, Hkv, Dv, q_strides x3, k_strides x3, v_strides x3,\n"
     "softmax_scale, softcap, dtype, causal, mask_align, window_left, window_right, path, stream)\n\n"
     "forward() of a dense call, AttentionParams filled in C++ (o [B, Sq, Hq, Dv] and lse [B, Hq, Sq] contiguous)."},
    {"backward_dense", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_backward_dense)), METH_FASTCALL,
     "backward_dense(<forward_dense's arguments but the stream>, dout x4, dq x4, dk x4, dv x4, deterministic, stream)\n\n"
     "attention_backward of a dense call (each gradient: address, batch, seq and head strides in elements)."},
    {"validate", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_validate)),
     METH_VARARGS | METH_KEYWORDS,
     "validate(params, stream=0)\n\nflashcore::validate: raises ValueError naming the argument and the rule; "
     "writes nothing."},
    {"select_path", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_select_path)),
     METH_VARARGS | METH_KEYWORDS,
     "select_path(params)\n\nThe path forward() would run (AUTO resolved); raises UnsupportedError if none."},
    {nullptr, nullptr, 0, nullptr}};

// A pointer field of AttentionParams exposed as an int property (0 = null).
template <typename T>
void def_pointer(py::class_<AttentionParams>& cls, const char* name, T* AttentionParams::*field) {
  cls.def_property(
      name, [field](const AttentionParams& p) { return reinterpret_cast<uintptr_t>(p.*field); },
      [field](AttentionParams& p, uintptr_t address) { p.*field = reinterpret_cast<T*>(address); });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "flashcore C++ API bindings (raw pointers, no framework dependency)";

  g_unsupported_error = PyErr_NewExceptionWithDoc(
      "flashcore._C.UnsupportedError",
      "A valid call that no kernel path of this build/device can run (the message lists why).",
      PyExc_NotImplementedError, nullptr);
  if (g_unsupported_error == nullptr) throw py::error_already_set();
  m.attr("UnsupportedError") = py::handle(g_unsupported_error);  // module attr takes its own ref
  PyObject* invalid_bases = PyTuple_Pack(2, PyExc_ValueError, PyExc_RuntimeError);
  if (invalid_bases == nullptr) throw py::error_already_set();
  g_invalid_argument_error = PyErr_NewExceptionWithDoc(
      "flashcore._C.InvalidArgumentError",
      "The call breaks a rule of the API; the message names the argument and the rule. A ValueError and "
      "a RuntimeError.",
      invalid_bases, nullptr);
  Py_DECREF(invalid_bases);
  if (g_invalid_argument_error == nullptr) throw py::error_already_set();
  m.attr("InvalidArgumentError") = py::handle(g_invalid_argument_error);
  g_slow_path_warning = PyErr_NewExceptionWithDoc(
      "flashcore._C.SlowPathWarning",
      "A call ran on the naive reference kernel because no fused kernel takes it (the message says why and "
      "how to fix it); flashcore.set_strict(True) makes such calls raise UnsupportedError instead.",
      PyExc_UserWarning, nullptr);
  if (g_slow_path_warning == nullptr) throw py::error_already_set();
  m.attr("SlowPathWarning") = py::handle(g_slow_path_warning);
  flashcore::set_slow_path_handler(&record_slow_path_warning);
  m.def(
      "set_slow_path_policy", [](int policy) {
        if (policy < 0 || policy > 2) throw py::value_error("policy: 0 (warn), 1 (error) or 2 (allow)");
        flashcore::set_slow_path_policy(static_cast<flashcore::SlowPathPolicy>(policy));
      },
      py::arg("policy"), "flashcore::set_slow_path_policy: 0 warn (default), 1 error (strict), 2 allow.");
  m.def(
      "check_errors",
      [](uintptr_t stream) {
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::check_errors(reinterpret_cast<cudaStream_t>(stream));
        }
        if (!status.ok()) {
          set_error(status);
          throw py::error_already_set();
        }
      },
      py::arg("stream") = 0,
      "flashcore::check_errors: waits for `stream`, then raises for a problem the device check of an earlier "
      "varlen call's metadata found.");
  m.def(
      "slow_path_policy", [] { return static_cast<int>(flashcore::slow_path_policy()); },
      "flashcore::slow_path_policy: 0 warn, 1 error (strict; FLASHCORE_STRICT=1 starts there), 2 allow.");

  py::enum_<StatusCode>(m, "StatusCode")
      .value("OK", StatusCode::kOk)
      .value("INVALID_ARGUMENT", StatusCode::kInvalidArgument)
      .value("UNSUPPORTED", StatusCode::kUnsupported)
      .value("CUDA_ERROR", StatusCode::kCudaError)
      .value("INTERNAL", StatusCode::kInternal);
  py::enum_<DType>(m, "DType")
      .value("FLOAT16", DType::kFloat16)
      .value("BFLOAT16", DType::kBFloat16)
      .value("FLOAT32", DType::kFloat32);
  py::enum_<MaskAlign>(m, "MaskAlign")
      .value("BOTTOM_RIGHT", MaskAlign::kBottomRight)
      .value("TOP_LEFT", MaskAlign::kTopLeft);
  py::enum_<KernelPath>(m, "KernelPath")
      .value("AUTO", KernelPath::kAuto)
      .value("SM90", KernelPath::kSm90)
      .value("SM80", KernelPath::kSm80)
      .value("NAIVE_GPU", KernelPath::kNaiveGpu)
      .value("CPU_REFERENCE", KernelPath::kCpuReference)
      .value("DECODE", KernelPath::kDecode);
  m.attr("WINDOW_INFINITE") = flashcore::kWindowInfinite;

  py::class_<flashcore::ForwardOverrides>(m, "ForwardOverrides",
                                         "flashcore::ForwardOverrides: forced sm90 plan choices (tests, tuning)")
      .def(py::init<>())
      .def_readwrite("schedule", &flashcore::ForwardOverrides::schedule)
      .def_readwrite("block_n", &flashcore::ForwardOverrides::block_n)
      .def_readwrite("always_rescale", &flashcore::ForwardOverrides::always_rescale)
      .def_readwrite("cluster", &flashcore::ForwardOverrides::cluster)
      .def_readwrite("long_tiles", &flashcore::ForwardOverrides::long_tiles)
      .def_readwrite("short_tiles", &flashcore::ForwardOverrides::short_tiles)
      .def_readwrite("pair_tiles", &flashcore::ForwardOverrides::pair_tiles)
      .def_readwrite("heads_per_group", &flashcore::ForwardOverrides::heads_per_group)
      .def_readwrite("stream_k", &flashcore::ForwardOverrides::stream_k)
      .def_readwrite("max_grid_units", &flashcore::ForwardOverrides::max_grid_units);
  m.def(
      "set_forward_overrides",
      [](const flashcore::ForwardOverrides* overrides) {
        g_has_overrides = overrides != nullptr;
        if (overrides != nullptr) g_overrides = *overrides;
      },
      py::arg("overrides").none(true),
      "Forced sm90 plan choices for every later forward call of this process (None: the plan's own rules). "
      "Tests and tuning only.");

  py::class_<AttentionParams> params(m, "AttentionParams",
                                     "flashcore::AttentionParams; pointers are ints (0 = null)");
  params.def(py::init<>());
  def_pointer(params, "q", &AttentionParams::q);
  def_pointer(params, "k", &AttentionParams::k);
  def_pointer(params, "v", &AttentionParams::v);
  def_pointer(params, "o", &AttentionParams::o);
  def_pointer(params, "lse", &AttentionParams::lse);
  def_pointer(params, "alibi_slopes", &AttentionParams::alibi_slopes);
  def_pointer(params, "cu_seqlens_q", &AttentionParams::cu_seqlens_q);
  def_pointer(params, "cu_seqlens_k", &AttentionParams::cu_seqlens_k);
  def_pointer(params, "seqused_k", &AttentionParams::seqused_k);
  def_pointer(params, "block_table", &AttentionParams::block_table);
  def_pointer(params, "kv_batch_idx", &AttentionParams::kv_batch_idx);
  def_pointer(params, "leftpad_k", &AttentionParams::leftpad_k);
#define FC_FIELD(name) params.def_readwrite(#name, &AttentionParams::name)
  FC_FIELD(q_batch_stride); FC_FIELD(q_seq_stride); FC_FIELD(q_head_stride);
  FC_FIELD(k_batch_stride); FC_FIELD(k_seq_stride); FC_FIELD(k_head_stride);
  FC_FIELD(v_batch_stride); FC_FIELD(v_seq_stride); FC_FIELD(v_head_stride);
  FC_FIELD(o_batch_stride); FC_FIELD(o_seq_stride); FC_FIELD(o_head_stride);
  FC_FIELD(lse_batch_stride); FC_FIELD(lse_head_stride);
  FC_FIELD(batch); FC_FIELD(seqlen_q); FC_FIELD(seqlen_k); FC_FIELD(heads_q); FC_FIELD(heads_kv);
  FC_FIELD(head_dim_qk); FC_FIELD(head_dim_v); FC_FIELD(dtype);
  FC_FIELD(softmax_scale); FC_FIELD(softcap); FC_FIELD(alibi_batch_stride);
  FC_FIELD(causal); FC_FIELD(mask_align); FC_FIELD(window_left); FC_FIELD(window_right);
  FC_FIELD(total_q); FC_FIELD(total_k); FC_FIELD(check_device_metadata); FC_FIELD(path); FC_FIELD(num_splits);
  FC_FIELD(block_table_batch_stride); FC_FIELD(pages_per_seq); FC_FIELD(page_size); FC_FIELD(num_pages);
  FC_FIELD(kv_batch);
#undef FC_FIELD
  params.def("is_varlen", &AttentionParams::is_varlen);
  params.def("effective_scale", &AttentionParams::effective_scale);

  m.def(
      "backward",
      [](const AttentionParams& forward, const std::vector<int64_t>& dout, const std::vector<int64_t>& dq,
         const std::vector<int64_t>& dk, const std::vector<int64_t>& dv, bool deterministic, uintptr_t stream) {
        // Each gradient: (address, batch stride, seq stride, head stride), elements.
        for (const auto* g : {&dout, &dq, &dk, &dv}) {
          if (g->size() != 4) throw py::value_error("backward: each gradient is (address, batch, seq, head strides)");
        }
        flashcore::BackwardParams bp;
        bp.forward = forward;
        bp.forward.overrides = nullptr;
        int64_t grad[16];
        for (int t = 0; t < 4; ++t) {
          const std::vector<int64_t>& g = t == 0 ? dout : t == 1 ? dq : t == 2 ? dk : dv;
          for (int i = 0; i < 4; ++i) grad[4 * t + i] = g[size_t(i)];
        }
        set_gradients(bp, grad);
        bp.deterministic = deterministic;
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::attention_backward(bp, reinterpret_cast<cudaStream_t>(stream));
        }
        if (!status.ok()) {
          set_error(status);
          throw py::error_already_set();
        }
        if (!emit_pending_warning()) throw py::error_already_set();
      },
      py::arg("forward"), py::arg("dout"), py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("deterministic") = false,
      py::arg("stream") = 0,
      "flashcore::attention_backward: `forward` as the forward ran (its o and lse are read); each gradient is "
      "(address, batch stride, seq stride, head stride) in elements.");
  // forward_kvcache: flashcore::attention_with_kvcache. `attention` describes the attention over the
  // cache (k, v = the caches); k_new / v_new are (address, batch, seq, head strides) in elements
  // (address 0: no append); rotary_cos / rotary_sin addresses (0: no rotary).
  m.def(
      "forward_kvcache",
      [](const AttentionParams& attention, uintptr_t cache_seqlens, const std::vector<int64_t>& k_new,
         const std::vector<int64_t>& v_new, int seqlen_new, uintptr_t rotary_cos, uintptr_t rotary_sin, int rotary_dim,
         int rotary_len, bool rotary_interleaved, uintptr_t stream) {
        if (k_new.size() != 4 || v_new.size() != 4) {
          throw py::value_error("forward_kvcache: k_new and v_new are (address, batch, seq, head strides)");
        }
        flashcore::KvCacheParams kp;
        kp.attention = attention;
        kp.attention.overrides = nullptr;
        kp.cache_seqlens = reinterpret_cast<const int32_t*>(cache_seqlens);
        kp.k_new = reinterpret_cast<const void*>(uintptr_t(k_new[0]));
        kp.k_new_batch_stride = k_new[1], kp.k_new_seq_stride = k_new[2], kp.k_new_head_stride = k_new[3];
        kp.v_new = reinterpret_cast<const void*>(uintptr_t(v_new[0]));
        kp.v_new_batch_stride = v_new[1], kp.v_new_seq_stride = v_new[2], kp.v_new_head_stride = v_new[3];
        kp.seqlen_new = seqlen_new;
        kp.rotary_cos = reinterpret_cast<const void*>(rotary_cos);
        kp.rotary_sin = reinterpret_cast<const void*>(rotary_sin);
        kp.rotary_dim = rotary_dim;
        kp.rotary_len = rotary_len;
        kp.rotary_interleaved = rotary_interleaved;
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::attention_with_kvcache(kp, reinterpret_cast<cudaStream_t>(stream));
        }
        if (!status.ok()) {
          set_error(status);
          throw py::error_already_set();
        }
        if (!emit_pending_warning()) throw py::error_already_set();
      },
      py::arg("attention"), py::arg("cache_seqlens"), py::arg("k_new"), py::arg("v_new"), py::arg("seqlen_new"),
      py::arg("rotary_cos"), py::arg("rotary_sin"), py::arg("rotary_dim"), py::arg("rotary_len"),
      py::arg("rotary_interleaved"), py::arg("stream") = 0,
      "flashcore::attention_with_kvcache: append k_new / v_new to the cache in place (rotary optional), then "
      "attend q over it.");
  // merge_states: flashcore::merge_attention_states on raw addresses. Each o tensor is (address,
  // batch stride, seq stride, head stride), each lse (address, batch stride, head stride), in
  // elements; lse's address may be 0. dtype is a DType code (int). Host addresses run on the CPU.
  m.def(
      "merge_states",
      [](const std::vector<int64_t>& o_a, const std::vector<int64_t>& lse_a, const std::vector<int64_t>& o_b,
         const std::vector<int64_t>& lse_b, const std::vector<int64_t>& o, const std::vector<int64_t>& lse, int batch,
         int seqlen, int heads, int head_dim, int dtype, uintptr_t stream) {
        for (const auto* t : {&o_a, &o_b, &o}) {
          if (t->size() != 4) throw py::value_error("merge_states: each o is (address, batch, seq, head strides)");
        }
        for (const auto* t : {&lse_a, &lse_b, &lse}) {
          if (t->size() != 3) throw py::value_error("merge_states: each lse is (address, batch, head strides)");
        }
        flashcore::MergeStatesParams p;
        p.o_a = reinterpret_cast<const void*>(uintptr_t(o_a[0]));
        p.o_a_batch_stride = o_a[1], p.o_a_seq_stride = o_a[2], p.o_a_head_stride = o_a[3];
        p.o_b = reinterpret_cast<const void*>(uintptr_t(o_b[0]));
        p.o_b_batch_stride = o_b[1], p.o_b_seq_stride = o_b[2], p.o_b_head_stride = o_b[3];
        p.o = reinterpret_cast<void*>(uintptr_t(o[0]));
        p.o_batch_stride = o[1], p.o_seq_stride = o[2], p.o_head_stride = o[3];
        p.lse_a = reinterpret_cast<const float*>(uintptr_t(lse_a[0]));
        p.lse_a_batch_stride = lse_a[1], p.lse_a_head_stride = lse_a[2];
        p.lse_b = reinterpret_cast<const float*>(uintptr_t(lse_b[0]));
        p.lse_b_batch_stride = lse_b[1], p.lse_b_head_stride = lse_b[2];
        p.lse = reinterpret_cast<float*>(uintptr_t(lse[0]));
        p.lse_batch_stride = lse[1], p.lse_head_stride = lse[2];
        p.batch = batch, p.seqlen = seqlen, p.heads = heads, p.head_dim = head_dim;
        p.dtype = static_cast<DType>(dtype);
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::merge_attention_states(p, reinterpret_cast<cudaStream_t>(stream));
        }
        if (!status.ok()) {
          set_error(status);
          throw py::error_already_set();
        }
      },
      py::arg("o_a"), py::arg("lse_a"), py::arg("o_b"), py::arg("lse_b"), py::arg("o"), py::arg("lse"),
      py::arg("batch"), py::arg("seqlen"), py::arg("heads"), py::arg("head_dim"), py::arg("dtype"),
      py::arg("stream") = 0,
      "flashcore::merge_attention_states: o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b, "
      "lse = log(exp(lse_a) + exp(lse_b)); o may be o_a and lse may be lse_a (in place).");
  m.def("set_dense_strides", &flashcore::set_dense_strides, py::arg("params"),
        "Fill the strides of a dense [B, S, H, D] problem and lse [B, Hq, Sq] (varlen: [Hq, total_q]).");

  if (PyModule_AddFunctions(m.ptr(), g_status_methods) != 0) throw py::error_already_set();
  m.def(
      "supports",
      [](const AttentionParams& p) {
        py::list out;
        for (const auto& s : flashcore::supports(p)) out.append(py::make_tuple(s.path, s.supported, s.reason));
        return out;
      },
      py::arg("params"), "[(KernelPath, supported, reason)] for every concrete path, in dispatch order.");
  m.def("kernel_path_name", [](KernelPath path) { return std::string(flashcore::kernel_path_name(path)); });
  m.def("dtype_name", [](DType dtype) { return std::string(flashcore::dtype_name(dtype)); });
  m.def(
      "softmax_variant_names",
      [] {
        std::vector<std::string> names;
        for (int v = 0; v < flashcore::kSoftmaxVariantCount; ++v)
          names.emplace_back(flashcore::softmax_variant_name(static_cast<flashcore::SoftmaxVariant>(v)));
        return names;
      },
      "Names of the softmax ladder's variants, in SoftmaxVariant order (0 = auto).");
  m.def("build_info", &flashcore::build_info, "Version, architectures, head dims, dtypes and paths of this build.");
}
