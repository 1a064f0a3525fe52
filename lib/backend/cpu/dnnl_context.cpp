#include "backend/cpu/dnnl_context.h"

#include "core/error.h"

namespace dtrain::cpu {

dnnl::memory::desc plain_desc(const Shape& shape, dnnl::memory::data_type type) {
  dnnl_tag tag;
  switch (shape.rank()) {
    case 1:
      tag = dnnl_tag::a;
      break;
    case 2:
      tag = dnnl_tag::ab;
      break;
    case 3:
      tag = dnnl_tag::abc;
      break;
    case 4:
      tag = dnnl_tag::abcd;
      break;
    default:
      DTRAIN_CHECK(false) << "unsupported rank for oneDNN: " << shape.str();
  }
  return dnnl::memory::desc(to_dims(shape), type, tag);
}

dnnl::memory::desc activation_desc(const Shape& shape, int block) {
  switch (block) {
    case 1:
      return plain_desc(shape);
    case 8:
    case 16:
      DTRAIN_CHECK(shape.rank() == 4 && shape[1] % block == 0)
          << "no blocks of " << block << " channels for " << shape.str();
      return dnnl::memory::desc(to_dims(shape), dnnl::memory::data_type::f32,
                                block == 8 ? dnnl_tag::nChw8c : dnnl_tag::nChw16c);
    default:
      DTRAIN_CHECK(false) << "unsupported channel block " << block;
      return {};
  }
}

dnnl::memory::data_type dnnl_data_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return dnnl::memory::data_type::f32;
    case DType::bf16:
      return dnnl::memory::data_type::bf16;
    default:
      DTRAIN_CHECK(false) << "no oneDNN activations of dtype " << dtype_name(dtype);
      return {};
  }
}

dnnl::memory::desc activation_desc(const Shape& shape, int block, DType dtype) {
  const dnnl::memory::data_type type = dnnl_data_type(dtype);
  if (block == 1) return plain_desc(shape, type);
  const dnnl::memory::desc f32 = activation_desc(shape, block);  // checks shape and block
  return dnnl::memory::desc(f32.dims(), type, block == 8 ? dnnl_tag::nChw8c : dnnl_tag::nChw16c);
}

BoundArg::BoundArg(DnnlContext& ctx, const dnnl::memory::desc& user,
                   const dnnl::memory::desc& internal)
    : ctx_(&ctx), user_(user, ctx.engine, DNNL_MEMORY_NONE) {
  if (user == internal) {
    internal_ = user_;
    return;
  }
  scratch_ = Tensor::empty(Shape{static_cast<int64_t>(internal.get_size())}, DType::u8);
  internal_ = dnnl::memory(internal, ctx.engine, scratch_.raw());
  to_internal_ = dnnl::reorder(user_, internal_);
  to_user_ = dnnl::reorder(internal_, user_);
  to_internal_args_ = {{DNNL_ARG_FROM, user_}, {DNNL_ARG_TO, internal_}};
  to_user_args_ = {{DNNL_ARG_FROM, internal_}, {DNNL_ARG_TO, user_}};
}

dnnl::memory& BoundArg::input(const Tensor& t) {
  user_.set_data_handle(t.raw());
  if (to_internal_) to_internal_->execute(ctx_->stream, to_internal_args_);
  return internal_;
}

dnnl::memory& BoundArg::output(const Tensor& t) {
  user_.set_data_handle(t.raw());
  return internal_;
}

void BoundArg::finish_output() {
  if (to_user_) to_user_->execute(ctx_->stream, to_user_args_);
}

DnnlEltwise::DnnlEltwise(DnnlContext& ctx, dnnl::algorithm algorithm, bool from_output,
                         int64_t numel, const char* what, DType dtype)
    : ctx_(ctx), numel_(numel), what_(what), dtype_(dtype) {
  using namespace dnnl;
  auto md = plain_desc({numel_}, dnnl_data_type(dtype));
  auto fwd_pd = eltwise_forward::primitive_desc(
      {prop_kind::forward_training, algorithm, md, 0.f, 0.f}, ctx.engine);
  auto bwd_pd = eltwise_backward::primitive_desc({algorithm, md, md, 0.f, 0.f}, ctx.engine, fwd_pd);
  fwd_ = eltwise_forward(fwd_pd);
  bwd_ = eltwise_backward(bwd_pd);
  a_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
  b_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
  c_ = memory(md, ctx.engine, DNNL_MEMORY_NONE);
  fwd_args_ = {{DNNL_ARG_SRC, a_}, {DNNL_ARG_DST, b_}};
  bwd_args_ = {{from_output ? DNNL_ARG_DST : DNNL_ARG_SRC, a_},
               {DNNL_ARG_DIFF_DST, b_},
               {DNNL_ARG_DIFF_SRC, c_}};
}

void DnnlEltwise::check(const Tensor& t, const char* what) const {
  DTRAIN_CHECK(t.numel() == numel_ && t.dtype() == dtype_)
      << what_ << ": " << what << " is " << dtype_name(t.dtype()) << " " << t.shape().str()
      << ", expected " << numel_ << " " << dtype_name(dtype_) << " elements";
}

void DnnlEltwise::forward(const Tensor& x, const Tensor& y) {
  check(x, "x"), check(y, "y");
  a_.set_data_handle(x.raw());
  b_.set_data_handle(y.raw());
  fwd_.execute(ctx_.stream, fwd_args_);
}

void DnnlEltwise::backward(const Tensor& data, const Tensor& dy, const Tensor& dx) {
  check(data, "data"), check(dy, "dy"), check(dx, "dx");
  a_.set_data_handle(data.raw());
  b_.set_data_handle(dy.raw());
  c_.set_data_handle(dx.raw());
  bwd_.execute(ctx_.stream, bwd_args_);
}

}  // namespace dtrain::cpu
