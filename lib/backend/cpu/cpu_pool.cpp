// Max and average pooling on oneDNN pooling primitives, plain NCHW. The max-pool workspace
// (argmax indices) is returned to the caller so that several forwards can be in flight.
#include "backend/cpu/cpu_ops.h"
#include "core/error.h"

namespace dtrain::cpu {
namespace {

using namespace dnnl;

class CpuPool final : public PoolOp {
 public:
  CpuPool(DnnlContext& ctx, const PoolSpec& s) : ctx_(ctx), spec_(s) {
    DTRAIN_CHECK(s.out_height() > 0 && s.out_width() > 0)
        << "pooling output would be empty for input " << s.input_shape().str();
    auto src = plain_desc(s.input_shape()), dst = plain_desc(s.output_shape());
    algorithm alg = s.kind == PoolKind::max ? algorithm::pooling_max
                    : s.avg_include_padding ? algorithm::pooling_avg_include_padding
                                            : algorithm::pooling_avg_exclude_padding;
    memory::dims strides{s.stride_h, s.stride_w}, kernel{s.kernel_h, s.kernel_w};
    memory::dims pad{s.pad_h, s.pad_w};
    memory::dims pad_r{(s.out_height() - 1) * s.stride_h + s.kernel_h - s.height - s.pad_h,
                       (s.out_width() - 1) * s.stride_w + s.kernel_w - s.width - s.pad_w};
    auto fwd_pd = pooling_forward::primitive_desc(
        {prop_kind::forward_training, alg, src, dst, strides, kernel, pad, pad_r}, ctx.engine);
    auto bwd_pd = pooling_backward::primitive_desc({alg, src, dst, strides, kernel, pad, pad_r},
                                                   ctx.engine, fwd_pd);
    auto infer_pd = pooling_forward::primitive_desc(
        {prop_kind::forward_inference, alg, src, dst, strides, kernel, pad, pad_r}, ctx.engine);
    fwd_ = pooling_forward(fwd_pd);
    infer_ = pooling_forward(infer_pd);
    bwd_ = pooling_backward(bwd_pd);
    src_ = memory(src, ctx.engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst, ctx.engine, DNNL_MEMORY_NONE);
    ws_desc_ = fwd_pd.workspace_desc();
    if (ws_desc_.get_size() > 0) ws_ = memory(ws_desc_, ctx.engine, DNNL_MEMORY_NONE);
  }

  size_t workspace_bytes() const override { return ws_desc_.get_size(); }

  void forward(const Tensor& x, const Tensor& y, const Tensor& workspace, bool training) override {
    src_.set_data_handle(x.raw());
    dst_.set_data_handle(y.raw());
    if (!training || workspace_bytes() == 0) {
      (training ? fwd_ : infer_).execute(ctx_.stream, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}});
      return;
    }
    DTRAIN_CHECK(workspace.bytes() >= workspace_bytes()) << "pooling workspace too small";
    ws_.set_data_handle(workspace.raw());
    fwd_.execute(ctx_.stream,
                 {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}, {DNNL_ARG_WORKSPACE, ws_}});
  }

  void backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                const Tensor& dx) override {
    dst_.set_data_handle(dy.raw());
    src_.set_data_handle(dx.raw());
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, dst_}, {DNNL_ARG_DIFF_SRC, src_}};
    if (workspace_bytes() > 0) {
      ws_.set_data_handle(workspace.raw());
      args.emplace(DNNL_ARG_WORKSPACE, ws_);
    }
    bwd_.execute(ctx_.stream, args);
  }

 private:
  DnnlContext& ctx_;
  PoolSpec spec_;
  pooling_forward fwd_, infer_;
  pooling_backward bwd_;
  memory src_, dst_, ws_;
  memory::desc ws_desc_;
};

}  // namespace

std::unique_ptr<PoolOp> make_pool(DnnlContext& ctx, const PoolSpec& spec) {
  return std::make_unique<CpuPool>(ctx, spec);
}

}  // namespace dtrain::cpu
