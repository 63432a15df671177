// The core's composite modules (MultiheadAttention, TransformerBlock, GPT)
// for mixrt.nn: Python wrappers register their parameters and buffers by
// name (the core's tensors themselves, so optimizers and state_dict reach
// them) and forward through the core's forward.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/nn/module.h"
#include "core/nn/transformer.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/pair.h"
#include "nanobind/stl/shared_ptr.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/current_device.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {

void BindNn(nb::module_& m) {
  nb::class_<nn::Module>(m, "_CoreModule")
      .def(
          "forward",
          [](nn::Module& mod, const Tensor& x) {
            return ValueOrThrow(mod.forward(x));
          },
          nb::call_guard<nb::gil_scoped_release>())
      .def("named_parameters", &nn::Module::named_parameters)
      .def("named_buffers", &nn::Module::named_buffers)
      .def("train", [](nn::Module& mod, bool on) { mod.train(on); });

  m.def("_multihead_attention", [](int64_t embed_dim, int64_t num_heads,
                                   double dropout, bool is_causal) {
    return std::shared_ptr<nn::Module>(ValueOrThrow(
        nn::MultiheadAttention::Create(embed_dim, num_heads, CurrentDevice(),
                                       nullptr, dropout, is_causal)));
  });
  m.def("_transformer_block",
        [](int64_t width, int64_t heads, int64_t mlp_ratio, double dropout,
           bool causal) {
          nn::TransformerBlockOptions o;
          o.width = width;
          o.heads = heads;
          o.mlp_ratio = mlp_ratio;
          o.dropout = dropout;
          o.causal = causal;
          return std::shared_ptr<nn::Module>(
              ValueOrThrow(nn::TransformerBlock::Create(o, CurrentDevice())));
        });
  m.def("_gpt",
        [](int64_t vocab_size, int64_t context, int64_t width, int64_t heads,
           int64_t layers, double dropout, bool checkpoint) {
          nn::GPTOptions o;
          o.vocab_size = vocab_size;
          o.context = context;
          o.width = width;
          o.heads = heads;
          o.layers = layers;
          o.dropout = dropout;
          o.checkpoint = checkpoint;
          return std::shared_ptr<nn::Module>(
              ValueOrThrow(nn::GPT::Create(o, CurrentDevice())));
        });
}

}  // namespace mixrt::python
