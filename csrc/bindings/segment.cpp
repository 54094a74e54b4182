#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "bindings/graph_view.hpp"
#include "rpfast/segment.hpp"

namespace rpfast_bindings {
namespace {

// reduce=true: x [R, N, F] -> out [R, B, F] (segment sum); false: g [R, B, F] -> out [R, N, F].
template <bool Reduce>
void segment(const Array& src, const Array& ptr, Array& out, int threads) {
  if (src.ndim() != 3 || out.ndim() != 3) throw std::invalid_argument("segment: expected 3-D arrays");
  const Array& nodes = Reduce ? src : out;
  const int64_t R = src.shape(0), N = nodes.shape(1), F = src.shape(2);
  int64_t B = 0;
  const int64_t* p = checked_ptr(ptr, N, &B);
  expect_leading(Reduce ? out : src, "segments", {R, B, F});
  expect_leading(nodes, "nodes", {R, N, F});
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = in_ptr<T>(src, "src", 3);
    T* o = out_ptr<T>(out, "out", 3);
    run_kernel([&] {
      if constexpr (Reduce)
        rpfast::segment_sum<T>(s, p, R, N, B, F, o, threads);
      else
        rpfast::segment_broadcast<T>(s, p, R, N, B, F, o, threads);
    });
  };
  dispatch_float(src, run);
}

}  // namespace

void bind_segment(py::module_& m) {
  m.def("segment_sum", &segment<true>, py::arg("x"), py::arg("ptr"), py::arg("out"), py::arg("threads"));
  m.def("segment_broadcast", &segment<false>, py::arg("g"), py::arg("ptr"), py::arg("out"),
        py::arg("threads"));
}

}  // namespace rpfast_bindings
