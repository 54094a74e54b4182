#include <pybind11/stl.h>

#include <string>

#include "bindings/arrays.hpp"
#include "bindings/interrupt.hpp"
#include "bindings/bindings.hpp"
#include "rpfast/gin_network.hpp"

namespace rpfast_bindings {
namespace {

// A layer is an rpfast.ops.gin_network.GINLayerParams whose tensors are kernel buffers, read
// by field name: first | None, id_weight | None, eps [1], weights, gammas, betas,
// running_means, running_vars (lists), bn_eps (floats). Momenta are given per call
// (Weights::set_momenta): the Python side counts BatchNorm steps (rpfast/nn/runtime/batch_norm_steps.py).
template <class T>
std::vector<rpfast::GINLayerWeights<T>> layer_weights(const py::list& layers, int64_t in_dim) {
  std::vector<rpfast::GINLayerWeights<T>> out;
  int64_t F = in_dim;
  for (const py::handle& layer : layers) {
    rpfast::GINLayerWeights<T> w;
    const py::list gammas = layer.attr("gammas"), betas = layer.attr("betas"), weights = layer.attr("weights");
    const py::list means = layer.attr("running_means"), vars = layer.attr("running_vars");
    const py::list bn_eps = layer.attr("bn_eps");
    const py::object first_field = layer.attr("first"), id_field = layer.attr("id_weight");
    const int64_t S = static_cast<int64_t>(gammas.size());
    if (S < 1 || betas.size() != gammas.size() || means.size() != gammas.size() || vars.size() != gammas.size() ||
        bn_eps.size() != gammas.size() || static_cast<int64_t>(weights.size()) != S - 1)
      throw std::invalid_argument("GINNetwork: a layer needs S >= 1 stages of BatchNorm tensors and S - 1 weights");
    w.hidden = py::cast<Array>(gammas[0]).shape(0);
    const int64_t H = w.hidden;
    if (!first_field.is_none()) {
      const Array first = py::cast<Array>(first_field);
      expect_leading(first, "first", {H, F});
      w.first = in_ptr<T>(first, "first", 2);
      w.in_dim = F;
    }
    if (!id_field.is_none()) {
      const Array ids = py::cast<Array>(id_field);
      expect_dim(ids, "id_weight", 1, H);
      w.id_weight = in_ptr<T>(ids, "id_weight", 2);
      w.id_rows = ids.shape(0);
    }
    if (w.first == nullptr && w.id_weight == nullptr)
      throw std::invalid_argument("GINNetwork: a layer needs input features or IDs");
    const Array eps = py::cast<Array>(layer.attr("eps"));
    expect_dim(eps, "eps", 0, 1);
    w.eps = in_ptr<T>(eps, "eps", 1);
    for (int64_t s = 0; s < S; ++s) {
      Array gm = py::cast<Array>(gammas[s]), bt = py::cast<Array>(betas[s]), rm = py::cast<Array>(means[s]), rv = py::cast<Array>(vars[s]);
      for (const Array* a : {&gm, &bt, &rm, &rv}) expect_dim(*a, "BatchNorm tensor", 0, H);
      w.gammas.push_back(in_ptr<T>(gm, "gamma", 1));
      w.betas.push_back(in_ptr<T>(bt, "beta", 1));
      w.running_means.push_back(out_ptr<T>(rm, "running_mean", 1));
      w.running_vars.push_back(out_ptr<T>(rv, "running_var", 1));
      w.momenta.push_back(0.0);
      w.bn_eps.push_back(py::cast<double>(bn_eps[s]));
      if (s) {
        Array wt = py::cast<Array>(weights[s - 1]);
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

// A network's weights bound once (rpfast/ops/gin_network.py: NetworkWeights): the parsed layers
// and head keep pointers into the arrays, which this object keeps alive. The gradients of a
// backward go to one flat buffer in slots: per layer first, id_weight, eps, the S - 1 weights,
// the S gammas, the S betas (an absent tensor has an empty slot), then the classifier's
// weight and bias if there is a classifier.
template <class T>
class Weights {
 public:
  Weights(const py::list& layers, int64_t in_dim, bool input_readouts, int64_t id_dim,
          const py::object& cls_weight, const py::object& cls_bias)
      : keep_(py::make_tuple(layers, cls_weight, cls_bias)) {
    layers_ = layer_weights<T>(layers, in_dim);
    head_.input_readouts = input_readouts;
    head_.in_dim = in_dim;
    head_.id_dim = id_dim;
    if (in_dim < 0 || id_dim < 0) throw std::invalid_argument("GINNetwork: negative input width");
    // the ID histogram is indexed by the IDs, which forward checks against the ID rows
    if (input_readouts && layers_[0].id_weight != nullptr && layers_[0].id_rows != id_dim)
      throw std::invalid_argument("GINNetwork: id_dim must equal the first layer's id_weight rows");
    for (const auto& w : layers_) {
      slots_.push_back(w.first != nullptr ? w.hidden * w.in_dim : 0);
      slots_.push_back(w.id_weight != nullptr ? w.id_rows * w.hidden : 0);
      slots_.push_back(1);
      for (size_t s = 0; s < w.weights.size(); ++s) slots_.push_back(w.hidden * w.hidden);
      for (int pass = 0; pass < 2; ++pass)
        for (size_t s = 0; s < w.gammas.size(); ++s) slots_.push_back(w.hidden);
    }
    if (!cls_weight.is_none()) {
      const int64_t D = rpfast::GINNetwork<T>::embedding_width(layers_, head_);
      const Array weight = py::cast<Array>(cls_weight);
      expect_dim(weight, "classifier weight", 1, D);
      head_.cls_weight = in_ptr<T>(weight, "classifier weight", 2);
      head_.classes = weight.shape(0);
      slots_.push_back(head_.classes * D);
      slots_.push_back(0);
      if (!cls_bias.is_none()) {
        const Array bias = py::cast<Array>(cls_bias);
        expect_dim(bias, "classifier bias", 0, head_.classes);
        head_.cls_bias = in_ptr<T>(bias, "classifier bias", 1);
        slots_.back() = head_.classes;
      }
    }
  }

  // The next training calls' BatchNorm momenta, one per stage, layer by layer.
  void set_momenta(const std::vector<double>& momenta) {
    size_t m = 0;
    for (const auto& w : layers_) m += w.gammas.size();
    if (momenta.size() != m) throw std::invalid_argument("GINNetwork: one momentum per BatchNorm stage");
    m = 0;
    for (auto& w : layers_)
      for (size_t s = 0; s < w.gammas.size(); ++s) w.momenta[s] = momenta[m++];
  }

  // Points the BatchNorm statistics into one flat array: per stage, layer by layer, the running
  // mean then the running variance [H] each (a functional caller hands over fresh statistics
  // every call).
  void set_statistics(Array& running) {
    int64_t total = 0;
    for (const auto& w : layers_) total += 2 * w.hidden * static_cast<int64_t>(w.gammas.size());
    expect_dim(running, "running statistics", 0, total);
    T* base = out_ptr<T>(running, "running statistics", 1);
    for (auto& w : layers_)
      for (size_t s = 0; s < w.gammas.size(); ++s) {
        w.running_means[s] = base;
        w.running_vars[s] = base + w.hidden;
        base += 2 * w.hidden;
      }
    statistics_ = running;
  }

  const std::vector<rpfast::GINLayerWeights<T>>& layers() const { return layers_; }
  const rpfast::GINHead<T>& head() const { return head_; }
  const std::vector<int64_t>& slots() const { return slots_; }
  int64_t output_width() const {
    return head_.cls_weight != nullptr ? head_.classes : rpfast::GINNetwork<T>::embedding_width(layers_, head_);
  }

  // Gradient pointers into flat (the slots in order); nullptr where needs (one byte per slot) is 0.
  void gradients(const std::string& needs, Array& flat, std::vector<rpfast::GINLayerGrads<T>>& grads,
                 rpfast::GINHeadGrads<T>& head) const {
    if (needs.size() != slots_.size()) throw std::invalid_argument("GINNetwork: one needs flag per gradient slot");
    int64_t total = 0;
    for (int64_t n : slots_) total += n;
    expect_dim(flat, "flat gradients", 0, total);
    T* base = out_ptr<T>(flat, "flat gradients", 1);
    size_t k = 0;
    auto next = [&]() {
      T* p = needs[k] != 0 && slots_[k] > 0 ? base : nullptr;
      base += slots_[k++];
      return p;
    };
    grads.assign(layers_.size(), {});
    for (size_t l = 0; l < layers_.size(); ++l) {
      auto& g = grads[l];
      g.first = next();
      g.id_weight = next();
      g.eps = next();
      for (size_t s = 0; s < layers_[l].weights.size(); ++s) g.weights.push_back(next());
      // BatchNorm affine gradients are by-products of the backward: always written
      for (size_t s = 0; s < layers_[l].gammas.size(); ++s) g.gammas.push_back(base), base += slots_[k++];
      for (size_t s = 0; s < layers_[l].gammas.size(); ++s) g.betas.push_back(base), base += slots_[k++];
    }
    if (head_.cls_weight != nullptr) {
      head.cls_weight = next();
      head.cls_bias = next();
    }
  }

 private:
  std::vector<rpfast::GINLayerWeights<T>> layers_;
  rpfast::GINHead<T> head_;
  std::vector<int64_t> slots_;
  py::tuple keep_;
  Array statistics_;  // keeps set_statistics' array alive
};

rpfast::GINGraph graph_view(const Array& in_rowptr, const Array& in_col, const Array& out_rowptr,
                            const Array& out_col, const Array& ptr) {
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
  run_kernel([&] {
    rpfast::check_csr(g.in_rowptr, g.in_col, g.N, in_col.shape(0), "incoming CSR");
    rpfast::check_csr(g.out_rowptr, g.out_col, g.N, out_col.shape(0), "outgoing CSR");
    if (g.ptr[0] != 0 || g.ptr[g.B] != g.N) throw std::invalid_argument("GINNetwork: ptr must run from 0 to N");
    for (int64_t b = 0; b < g.B; ++b)
      if (g.ptr[b + 1] < g.ptr[b]) throw std::invalid_argument("GINNetwork: ptr must be non-decreasing");
  });
  return g;
}

template <class T>
class Network {
 public:
  // x: [Rx, N, F0] or None; ids: [R, N] int64 or None; out: [R, B, output width].
  void forward(const py::object& x, const py::object& ids, int64_t replicas, const Array& in_rowptr,
               const Array& in_col, const Array& out_rowptr, const Array& out_col,
               const Array& ptr, const Weights<T>& weights, bool training, bool save, Array& out,
               int threads) {
    const rpfast::GINGraph g = graph_view(in_rowptr, in_col, out_rowptr, out_col, ptr);
    const auto& layers = weights.layers();
    const T* xs = nullptr;
    int64_t x_replicas = 0, F0 = 0;
    if (!x.is_none()) {
      const Array xa = py::cast<Array>(x);
      if (xa.ndim() != 3 || xa.shape(1) != g.N || (xa.shape(0) != 1 && xa.shape(0) != replicas)) {
        std::string shape;
        for (py::ssize_t d = 0; d < xa.ndim(); ++d) shape += (d ? ", " : "") + std::to_string(xa.shape(d));
        throw std::invalid_argument("GINNetwork: x must be [1 or R=" + std::to_string(replicas) + ", N=" +
                                    std::to_string(g.N) + ", F], got [" + shape + "]");
      }
      xs = in_ptr<T>(xa, "x", 3);
      x_replicas = xa.shape(0);
      F0 = xa.shape(2);
    }
    if (F0 != weights.head().in_dim || (layers[0].first != nullptr && xs == nullptr))
      throw std::invalid_argument("GINNetwork: x must have the network's input width");
    const int64_t* id = nullptr;
    const int64_t id_rows = layers[0].id_weight != nullptr ? layers[0].id_rows : weights.head().id_dim;
    if (!ids.is_none()) {
      const Array ia = py::cast<Array>(ids);
      expect_leading(ia, "ids", {replicas, g.N});
      id = in_ptr<int64_t>(ia, "ids", 2);
      for (int64_t k = 0; k < replicas * g.N; ++k)
        if (id[k] < 0 || id[k] >= id_rows)
          throw std::out_of_range("ids must lie in [0, " + std::to_string(id_rows) + "), got " +
                                  std::to_string(id[k]));
    }
    if ((layers[0].id_weight != nullptr || weights.head().id_dim > 0) && id == nullptr)
      throw std::invalid_argument("GINNetwork: ids are required");
    expect_leading(out, "out", {replicas, g.B, weights.output_width()});
    T* o = out_ptr<T>(out, "out", 3);
    run_kernel([&] { net_.forward(xs, x_replicas, id, replicas, g, layers, weights.head(), training, save, o, threads); });
    shape_ = {replicas, g.N, g.B, weights.output_width(), x_replicas, F0};
  }

  // Writes the gradients into flat (see Weights) and grad_x unless None; needs: bytes, one per slot.
  void backward(const Array& grad, const Array& in_rowptr, const Array& in_col,
                const Array& out_rowptr, const Array& out_col, const Array& ptr,
                const Weights<T>& weights, bool training, const std::string& needs, Array& flat,
                const py::object& grad_x, int threads) {
    const rpfast::GINGraph g = graph_view(in_rowptr, in_col, out_rowptr, out_col, ptr);
    std::vector<rpfast::GINLayerGrads<T>> out;
    rpfast::GINHeadGrads<T> head;
    weights.gradients(needs, flat, out, head);
    const T* gp = in_ptr<T>(grad, "grad", 3);
    if (shape_.empty() || shape_[1] != g.N || shape_[2] != g.B || weights.head().in_dim != shape_[5] ||
        weights.output_width() != shape_[3])
      throw std::invalid_argument("GINNetwork.backward: graph or input differ from the saved forward");
    expect_leading(grad, "grad", {shape_[0], shape_[2], shape_[3]});
    T* gx = nullptr;
    if (!grad_x.is_none()) {
      Array a = py::cast<Array>(grad_x);
      expect_leading(a, "grad_x", {shape_[4], shape_[1], shape_[5]});
      gx = out_ptr<T>(a, "grad_x", 3);
    }
    run_kernel([&] { net_.backward(gp, g, weights.layers(), weights.head(), training, out, head, gx, threads); });
  }

 private:
  rpfast::GINNetwork<T> net_;
  std::vector<int64_t> shape_;  // the saved forward's R, N, B, output width, x replicas, F0
};

template <class T>
void bind_network(py::module_& m, const char* name, const char* weights_name) {
  py::class_<Weights<T>>(m, weights_name, "A GIN network's weights, bound once for many GINNetwork calls.",
                         py::module_local())
      .def(py::init([](const py::list& layers, int64_t in_dim, bool input_readouts, int64_t id_dim,
                       const py::object& cls_weight, const py::object& cls_bias, int) {
             return Weights<T>(layers, in_dim, input_readouts, id_dim, cls_weight, cls_bias);
           }),
           py::arg("layers"), py::arg("in_dim"), py::arg("input_readouts"), py::arg("id_dim"),
           py::arg("classifier_weight"), py::arg("classifier_bias"), py::arg("threads"))
      .def("set_statistics", &Weights<T>::set_statistics, py::arg("running"))
      .def("set_momenta", &Weights<T>::set_momenta, py::arg("momenta"))
      .def_property_readonly("slots", &Weights<T>::slots)
      .def_property_readonly("output_width", &Weights<T>::output_width);
  py::class_<Network<T>>(m, name, "A GIN network's forward and backward in one call; keeps the activations.",
                         py::module_local())  // each SIMD variant of the module registers its own class
      .def(py::init([](int) { return Network<T>(); }), py::arg("threads"))
      .def("forward", &Network<T>::forward, py::arg("x"), py::arg("ids"), py::arg("replicas"),
           py::arg("in_rowptr"), py::arg("in_col"), py::arg("out_rowptr"), py::arg("out_col"), py::arg("ptr"),
           py::arg("weights"), py::arg("training"), py::arg("save"), py::arg("out"), py::arg("threads"))
      .def("backward", &Network<T>::backward, py::arg("grad"), py::arg("in_rowptr"), py::arg("in_col"),
           py::arg("out_rowptr"), py::arg("out_col"), py::arg("ptr"), py::arg("weights"), py::arg("training"),
           py::arg("needs"), py::arg("flat"), py::arg("grad_x"), py::arg("threads"));
}

}  // namespace

void bind_gin_network(py::module_& m) {
  bind_network<float>(m, "GINNetworkF32", "GINWeightsF32");
  bind_network<double>(m, "GINNetworkF64", "GINWeightsF64");
}

}  // namespace rpfast_bindings
