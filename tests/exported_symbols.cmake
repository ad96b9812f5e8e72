# CTest ExportedSymbols: libflashcore.so exports the public API (the C++ functions of
# include/flashcore/*.hpp, the fc_* C ABI) and nothing of the internal namespaces or the kernels.
# Variables: LIB (the shared library), NM (nm).
execute_process(COMMAND ${NM} -DC --defined-only ${LIB} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed (${rc}) on ${LIB}")
endif()
string(REPLACE "\n" ";" lines "${symbols}")
set(internal "")
foreach(line IN LISTS lines)
  if(line MATCHES "flashcore::(detail|sm80|sm90|reference|attn|merge|kvcache|softmax|testing|bench)::|_kernel|cudart|__cuda")
    list(APPEND internal "${line}")
  endif()
endforeach()
list(LENGTH internal count)
if(count GREATER 0)
  list(SUBLIST internal 0 10 shown)
  string(REPLACE ";" "\n  " shown "${shown}")
  message(FATAL_ERROR "${count} internal symbols are exported, e.g.:\n  ${shown}")
endif()
foreach(required "flashcore::attention_forward" "flashcore::attention_with_kvcache" "flashcore::merge_attention_states"
                 "flashcore::softmax_forward" "fc_attention_forward" "fc_attention_with_kvcache"
                 "fc_merge_attention_states" "fc_softmax_forward")
  string(FIND "${symbols}" "${required}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${required} is not exported by ${LIB}")
  endif()
endforeach()
message(STATUS "exported symbols: public API only")
