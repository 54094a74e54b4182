#include <pybind11/stl.h>

#include "bindings/arrays.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/gin_network.hpp"

namespace rpfast_bindings {
namespace {

// Python layer tuple: (first | None, id_weight | None, eps, weights, gammas, betas,
// running_means, running_vars, momenta, bn_eps); see rpfast/ops/gin_network.py.
template <class T>
std::vector<rpfast::GINLayerWeights<T>> layer_weights(const py::list& layers, int64_t in_dim) {
  std::vector<rpfast::GINLayerWeights<T>> out;
  int64_t F = in_dim;
  for (const py::handle& item : layers) {
    const py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    if (t.size() != 10) throw std::invalid_argument("GINNetwork: a layer is a 10-tuple");
    rpfast::GINLayerWeights<T> w;
    const py::list gammas = t[4], betas = t[5], means = t[6], vars = t[7], weights = t[3];
    const py::list momenta = t[8], bn_eps = t[9];
    const int64_t S = static_cast<int64_t>(gammas.size());
    if (S < 1 || betas.size() != gammas.size() || means.size() != gammas.size() || vars.size() != gammas.size() ||
        momenta.size() != gammas.size() || bn_eps.size() != gammas.size() ||
        static_cast<int64_t>(weights.size()) != S - 1)
      throw std::invalid_argument("GINNetwork: a layer needs S >= 1 stages of BatchNorm tensors and S - 1 weights");
    w.hidden = py::cast<py::array>(gammas[0]).shape(0);
    const int64_t H = w.hidden;
    if (!t[0].is_none()) {
      const py::array first = t[0];
      expect_leading(first, "first", {H, F});
      w.first = in_ptr<T>(first, "first", 2);
      w.in_dim = F;
    }
    if (!t[1].is_none()) {
      const py::array ids = t[1];
      expect_dim(ids, "id_weight", 1, H);
      w.id_weight = in_ptr<T>(ids, "id_weight", 2);
      w.id_rows = ids.shape(0);
    }
    if (w.first == nullptr && w.id_weight == nullptr)
      throw std::invalid_argument("GINNetwork: a layer needs input features or IDs");
    w.eps = py::cast<double>(t[2]);
    for (int64_t s = 0; s < S; ++s) {
      py::array gm = gammas[s], bt = betas[s], rm = means[s], rv = vars[s];
      for (const py::array* a : {&gm, &bt, &rm, &rv}) expect_dim(*a, "BatchNorm tensor", 0, H);
      w.gammas.push_back(in_ptr<T>(gm, "gamma", 1));
      w.betas.push_back(in_ptr<T>(bt, "beta", 1));
      w.running_means.push_back(out_ptr<T>(rm, "running_mean", 1));
      w.running_vars.push_back(out_ptr<T>(rv, "running_var", 1));
      w.momenta.push_back(py::cast<double>(momenta[s]));
      w.bn_eps.push_back(py::cast<double>(bn_eps[s]));
      if (s) {
        py::array wt = weights[s - 1];
        expect_leading(wt, "weight", {H, H});
        w.weights.push_back(in_ptr<T>(wt, "weight", 2));
      }
    }
    out.push_back(std::move(w));
    F = H;
  }
  if (out.empty()) throw std::invalid_argument("GINNetwork: no layers");
  return out;
}

// Python grads tuple: (first | None, id_weight | None, weights (entries may be None), gammas, betas).
template <class T>
std::vector<rpfast::GINLayerGrads<T>> layer_grads(const py::list& grads,
                                                  const std::vector<rpfast::GINLayerWeights<T>>& layers) {
  if (grads.size() != layers.size()) throw std::invalid_argument("GINNetwork: one gradient tuple per layer");
  std::vector<rpfast::GINLayerGrads<T>> out(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const py::tuple t = grads[l];
    const auto& w = layers[l];
    auto& g = out[l];
    const int64_t H = w.hidden;
    if (t.size() != 5) throw std::invalid_argument("GINNetwork: a gradient entry is a 5-tuple");
    if (!t[0].is_none() && w.first != nullptr) {
      py::array a = t[0];
      expect_leading(a, "grad_first", {H, w.in_dim});
      g.first = out_ptr<T>(a, "grad_first", 2);
    }
    if (!t[1].is_none() && w.id_weight != nullptr) {
      py::array a = t[1];
      expect_leading(a, "grad_id_weight", {w.id_rows, H});
      g.id_weight = out_ptr<T>(a, "grad_id_weight", 2);
    }
    const py::list weights = t[2], gammas = t[3], betas = t[4];
    if (weights.size() != w.weights.size() || gammas.size() != w.gammas.size() || betas.size() != w.gammas.size())
      throw std::invalid_argument("GINNetwork: gradient lists differ from the layer's stages");
    for (size_t s = 0; s < weights.size(); ++s) {
      if (weights[s].is_none()) {
        g.weights.push_back(nullptr);
        continue;
      }
      py::array a = weights[s];
      expect_leading(a, "grad_weight", {H, H});
      g.weights.push_back(out_ptr<T>(a, "grad_weight", 2));
    }
    for (size_t s = 0; s < gammas.size(); ++s) {
      py::array a = gammas[s], b = betas[s];
      expect_dim(a, "grad_gamma", 0, H);
      expect_dim(b, "grad_beta", 0, H);
      g.gammas.push_back(out_ptr<T>(a, "grad_gamma", 1));
      g.betas.push_back(out_ptr<T>(b, "grad_beta", 1));
    }
  }
  return out;
}

rpfast::GINGraph graph_view(const py::array& in_rowptr, const py::array& in_col, const py::array& out_rowptr,
                            const py::array& out_col, const py::array& ptr) {
  rpfast::GINGraph g{};
  g.N = in_rowptr.shape(0) - 1;
  g.B = ptr.shape(0) - 1;
  g.in_rowptr = in_ptr<int64_t>(in_rowptr, "in_rowptr", 1);
  g.in_col = in_ptr<int64_t>(in_col, "in_col", 1);
  g.out_rowptr = in_ptr<int64_t>(out_rowptr, "out_rowptr", 1);
  g.out_col = in_ptr<int64_t>(out_col, "out_col", 1);
  g.ptr = in_ptr<int64_t>(ptr, "ptr", 1);
  expect_dim(out_rowptr, "out_rowptr", 0, g.N + 1);
  if (g.N < 0 || g.B < 0) throw std::invalid_argument("GINNetwork: empty rowptr or ptr");
  py::gil_scoped_release release;
  rpfast::check_csr(g.in_rowptr, g.in_col, g.N, in_col.shape(0), "incoming CSR");
  rpfast::check_csr(g.out_rowptr, g.out_col, g.N, out_col.shape(0), "outgoing CSR");
  if (g.ptr[0] != 0 || g.ptr[g.B] != g.N) throw std::invalid_argument("GINNetwork: ptr must run from 0 to N");
  for (int64_t b = 0; b < g.B; ++b)
    if (g.ptr[b + 1] < g.ptr[b]) throw std::invalid_argument("GINNetwork: ptr must be non-decreasing");
  return g;
}

template <class T>
class Network {
 public:
  // x: [Rx, N, F0] or None; ids: [R, N] int64 or None; pooled: [R, B, sum of widths].
  void forward(const py::object& x, const py::object& ids, int64_t replicas, const py::array& in_rowptr,
               const py::array& in_col, const py::array& out_rowptr, const py::array& out_col,
               const py::array& ptr, const py::list& layers, bool training, bool save, py::array& pooled,
               int threads) {
    const rpfast::GINGraph g = graph_view(in_rowptr, in_col, out_rowptr, out_col, ptr);
    const T* xs = nullptr;
    int64_t x_replicas = 0, F0 = 0;
    if (!x.is_none()) {
      const py::array xa = x;
      if (xa.ndim() != 3 || xa.shape(1) != g.N || (xa.shape(0) != 1 && xa.shape(0) != replicas))
        throw std::invalid_argument("GINNetwork: x must be [1 or R, N, F]");
      xs = in_ptr<T>(xa, "x", 3);
      x_replicas = xa.shape(0);
      F0 = xa.shape(2);
    }
    const auto weights = layer_weights<T>(layers, F0);
    if (weights[0].first != nullptr && xs == nullptr) throw std::invalid_argument("GINNetwork: x is required");
    const int64_t* id = nullptr;
    if (!ids.is_none()) {
      const py::array ia = ids;
      expect_leading(ia, "ids", {replicas, g.N});
      id = in_ptr<int64_t>(ia, "ids", 2);
      for (int64_t k = 0; k < replicas * g.N; ++k)
        if (id[k] < 0 || id[k] >= weights[0].id_rows)
          throw std::out_of_range("GINNetwork: ids must lie in [0, id_weight rows)");
    }
    if (weights[0].id_weight != nullptr && id == nullptr) throw std::invalid_argument("GINNetwork: ids are required");
    int64_t width = 0;
    for (const auto& w : weights) width += w.hidden;
    expect_leading(pooled, "pooled", {replicas, g.B, width});
    T* out = out_ptr<T>(pooled, "pooled", 3);
    {
      py::gil_scoped_release release;
      net_.forward(xs, x_replicas, id, replicas, g, weights, training, save, out, threads);
    }
    shape_ = {replicas, g.N, g.B, width, x_replicas, F0};
  }

  // Returns the eps gradients, one per layer.
  std::vector<double> backward(const py::array& grad, const py::array& in_rowptr, const py::array& in_col,
                               const py::array& out_rowptr, const py::array& out_col, const py::array& ptr,
                               const py::list& layers, int64_t in_dim, bool training, const py::list& grads,
                               const py::object& grad_x, int threads) {
    const rpfast::GINGraph g = graph_view(in_rowptr, in_col, out_rowptr, out_col, ptr);
    const auto weights = layer_weights<T>(layers, in_dim);
    auto out = layer_grads<T>(grads, weights);
    const T* gp = in_ptr<T>(grad, "grad", 3);
    if (shape_.empty() || shape_[1] != g.N || shape_[2] != g.B || in_dim != shape_[5])
      throw std::invalid_argument("GINNetwork.backward: graph or input differ from the saved forward");
    expect_leading(grad, "grad", {shape_[0], shape_[2], shape_[3]});
    T* gx = nullptr;
    if (!grad_x.is_none()) {
      py::array a = grad_x;
      expect_leading(a, "grad_x", {shape_[4], shape_[1], shape_[5]});
      gx = out_ptr<T>(a, "grad_x", 3);
    }
    {
      py::gil_scoped_release release;
      net_.backward(gp, g, weights, training, out, gx, threads);
    }
    std::vector<double> eps;
    for (const auto& o : out) eps.push_back(o.eps);
    return eps;
  }

 private:
  rpfast::GINNetwork<T> net_;
  std::vector<int64_t> shape_;  // the saved forward's R, N, B, width, x replicas, F0
};

template <class T>
void bind_network(py::module_& m, const char* name) {
  py::class_<Network<T>>(m, name, "A GIN network's forward and backward in one call; keeps the activations.",
                         py::module_local())  // each SIMD variant of the module registers its own class
      .def(py::init([](int) { return Network<T>(); }), py::arg("threads"))
      .def("forward", &Network<T>::forward, py::arg("x"), py::arg("ids"), py::arg("replicas"),
           py::arg("in_rowptr"), py::arg("in_col"), py::arg("out_rowptr"), py::arg("out_col"), py::arg("ptr"),
           py::arg("layers"), py::arg("training"), py::arg("save"), py::arg("pooled"), py::arg("threads"))
      .def("backward", &Network<T>::backward, py::arg("grad"), py::arg("in_rowptr"), py::arg("in_col"),
           py::arg("out_rowptr"), py::arg("out_col"), py::arg("ptr"), py::arg("layers"), py::arg("in_dim"),
           py::arg("training"), py::arg("grads"), py::arg("grad_x"), py::arg("threads"));
}

}  // namespace

void bind_gin_network(py::module_& m) {
  bind_network<float>(m, "GINNetworkF32");
  bind_network<double>(m, "GINNetworkF64");
}

}  // namespace rpfast_bindings
