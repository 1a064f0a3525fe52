#!/usr/bin/env bash
# The CUDA plugin (lib/backend/cuda_plugin.h), on any machine, GPU or not: dtrain itself needs
# none of the CUDA libraries; `cluster.device: cuda` loads the plugin (every symbol it takes
# from dtrain found: it is opened with RTLD_NOW), which then speaks for the GPU; `auto` on a
# machine without a GPU leaves the plugin and the CUDA libraries unloaded.
source "$(dirname "$0")/lib.sh"

cuda_needed=$(readelf -d "$DTRAIN" | grep NEEDED | grep -E 'libcuda|libcublas|libcudnn|libnccl')
[ -z "$cuda_needed" ] || fail "dtrain needs CUDA libraries itself: $cuda_needed"

cfg="$WORK/tiny.yaml"
write_synthetic_config "$cfg" "$WORK/out"
probe=$("$DTRAIN" --config "$cfg" --set cluster.device=cuda --dry-run 2>&1)
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "$probe" | grep -q "CUDA plugin" &&
    fail "cluster.device: cuda: $(echo "$probe" | grep -m1 plugin)"
  echo "$probe" | grep -q "cluster.device: cuda, but" ||
    fail "cluster.device: cuda: exit code $rc without a reason: $probe"
fi
echo "cluster.device=cuda: exit code $rc: $(echo "$probe" | grep -m1 "cluster.device\|^backend")"

# LD_DEBUG=files names every library the dynamic linker opens.
auto=$(LD_DEBUG=files "$DTRAIN" --config "$cfg" --dry-run 2>&1)
picked=$(echo "$auto" | grep -m1 "cluster.device: auto picked")
echo "$picked"
if echo "$picked" | grep -q "picked cpu"; then
  loaded=$(echo "$auto" | grep -oE 'file=[^ ]*lib(cudart|cublas|cudnn|nccl|dtrain_cuda)[^ ]*' |
           sort -u)
  [ -z "$loaded" ] || fail "auto picked the CPU but loaded $(echo $loaded)"
fi
finish
