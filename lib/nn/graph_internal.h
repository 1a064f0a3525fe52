// Private to the Graph implementation files: the per-node bookkeeping and the per-batch
// tensor plans.
#pragma once
#include <memory>  // unique_ptr
#include <string>
#include <utility>  // pair
#include <vector>

#include "nn/graph.h"        // Graph, Layer
#include "nn/memory_plan.h"  // ArenaPlan

namespace dtrain {

struct Graph::Node {
  std::string name;
  std::unique_ptr<Layer> layer;                // null for the graph input (node 0)
  std::vector<int> inputs;                     // producer nodes
  std::vector<std::pair<int, int>> consumers;  // (node, input slot)
  Shape shape;                                 // output at the build batch
  std::vector<Shape> views;                    // per input, as the layer reads it
  std::vector<ParamDecl> params, buffers;
  int64_t param_offset = 0, param_count = 0, buffer_offset = 0;
  int range = -1;     // index in ranges_, for parameterised layers
  int tie = -1;       // the node whose parameter 0 this one uses as its weight (Layer::weight_tie)
  int64_t flops = 0;  // per sample
  DType dtype = DType::f32;  // of the output and its gradient (assign_precision)
  int stream = 0;            // the node's index before casts were inserted: its dropout stream
  int block_id = -1;         // index in block_names_, or -1 (GraphNode::block)

  // Memory (materialize): whose buffers this node's output and gradient live in.
  ChannelBlock block = 1;  // the output's layout (and its gradient's)
  int out_owner = 0, grad_owner = 0;
  Tensor out_buf, grad_buf;             // owned storage at the build batch (undefined when shared)
  std::vector<Route> routes;            // per input: how its gradient reaches the producer
  std::vector<int64_t> scratch_offset;  // per input with Route::accumulate
  // Depend on freezing (update_needs).
  bool need_grad = false;  // d(loss)/d(output) is needed
  bool trainable = false;  // parameter gradients are computed
};

// What the activation planner reads of a node: its layer's answers to the memory questions,
// its edges, shape and dtype, its block.
struct Graph::MemoryNode {
  const Layer* layer = nullptr;  // null for the graph input
  std::vector<int> inputs;
  std::vector<std::pair<int, int>> consumers;
  Shape shape;
  std::vector<Shape> views;
  DType dtype = DType::f32;
  int block_id = -1;
  int64_t saved = 0;  // Layer::saved_bytes
};

// The planner's answer (graph_plan.cpp), per node unless said otherwise.
struct Graph::MemoryPlan {
  std::vector<int> out_owner, grad_owner;
  std::vector<std::vector<Route>> routes;            // per input
  std::vector<std::vector<int64_t>> scratch_offset;  // per input with Route::accumulate, bytes
  int64_t scratch = 0;                               // bytes of the accumulation scratch
  std::vector<bool> gradient_writable;               // Layer::set_output_gradient_writable
  std::vector<int> act, grad;                        // the arena buffer of the owners, or -1
  std::vector<int> saved;  // the arena buffer of each node\'s saved state, or -1
  ArenaPlan arena;
  // Recomputation: the blocks' nodes that run again (in order), and per node the block to
  // recompute just before its backward (-1: none).
  std::vector<std::vector<int>> recompute_nodes;
  std::vector<int> recompute_at;
};

// Tensors for one batch size: views of the build-batch buffers, made once.
struct Graph::Plan {
  int64_t batch = 0;
  std::vector<Tensor> out, grad;             // per node
  std::vector<std::vector<Tensor>> in;       // per node, per input
  std::vector<std::vector<Tensor>> dx;       // gradient targets; undefined = none
  std::vector<std::vector<Tensor>> scratch;  // per node, per accumulating input
  Tensor staging;                            // input copy from another device
  const void* bound = nullptr;               // data of the bound input
};

}  // namespace dtrain
