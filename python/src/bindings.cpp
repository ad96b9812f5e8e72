// flashcore._C — the Python extension, free of any framework.
//
// Tensors cross this boundary as raw addresses (Python ints), with sizes and strides in elements,
// and the CUDA stream as an integer handle. Python fills an `AttentionParams` and calls `forward`;
// the C++ API validates, dispatches and runs. Errors come back as exceptions carrying the C++
// message verbatim:
//   kInvalidArgument -> ValueError
//   kUnsupported     -> flashcore._C.UnsupportedError (a NotImplementedError, so a RuntimeError):
//                       a valid call that no kernel path runs
//   anything else    -> RuntimeError
// Host addresses (numpy arrays, CPU tensors) run the fp64 CPU reference; device addresses run on
// the given stream.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "flashcore/flashcore.hpp"

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

void raise_if_error(const Status& status) {
  if (status.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  if (status.code == StatusCode::kInvalidArgument) type = PyExc_ValueError;
  if (status.code == StatusCode::kUnsupported) type = g_unsupported_error;
  PyErr_SetString(type, status.message.c_str());
  throw py::error_already_set();
}

cudaStream_t to_stream(uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

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
      .value("CPU_REFERENCE", KernelPath::kCpuReference);
  m.attr("WINDOW_INFINITE") = flashcore::kWindowInfinite;

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
  FC_FIELD(total_q); FC_FIELD(total_k); FC_FIELD(path); FC_FIELD(num_splits);
#undef FC_FIELD
  params.def("is_varlen", &AttentionParams::is_varlen);
  params.def("effective_scale", &AttentionParams::effective_scale);

  m.def("set_dense_strides", &flashcore::set_dense_strides, py::arg("params"),
        "Fill the strides of a dense [B, S, H, D] problem and lse [B, Hq, Sq] (varlen: [Hq, total_q]).");

  // Computation and validation release the GIL: the CPU reference can take a while, and validation
  // may copy cu_seqlens from the device.
  m.def(
      "forward",
      [](const AttentionParams& p, uintptr_t stream) {
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::attention_forward(p, to_stream(stream));
        }
        raise_if_error(status);
      },
      py::arg("params"), py::arg("stream") = 0,
      "flashcore::attention_forward on the given CUDA stream handle (0 = legacy default stream).");
  m.def(
      "validate",
      [](const AttentionParams& p, uintptr_t stream) {
        Status status;
        {
          py::gil_scoped_release release;
          status = flashcore::validate(p, to_stream(stream));
        }
        raise_if_error(status);
      },
      py::arg("params"), py::arg("stream") = 0,
      "flashcore::validate: raises ValueError naming the argument and the rule; writes nothing.");
  m.def(
      "supports",
      [](const AttentionParams& p) {
        py::list out;
        for (const auto& s : flashcore::supports(p)) out.append(py::make_tuple(s.path, s.supported, s.reason));
        return out;
      },
      py::arg("params"), "[(KernelPath, supported, reason)] for every concrete path, in dispatch order.");
  m.def(
      "select_path",
      [](const AttentionParams& p) {
        KernelPath chosen = KernelPath::kAuto;
        raise_if_error(flashcore::select_path(p, &chosen));
        return chosen;
      },
      py::arg("params"), "The path forward() would run (AUTO resolved); raises UnsupportedError if none.");
  m.def("kernel_path_name", [](KernelPath path) { return std::string(flashcore::kernel_path_name(path)); });
  m.def("dtype_name", [](DType dtype) { return std::string(flashcore::dtype_name(dtype)); });
  m.def("build_info", &flashcore::build_info, "Version, architectures, head dims, dtypes and paths of this build.");
}
