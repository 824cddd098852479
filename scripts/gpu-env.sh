# Sourced on a GPU machine: puts NVRTC on the library path where the loader does not
# find it (a CUDA toolkit's lib64, or the nvidia-cuda-nvrtc wheel of a Python install),
# requires the GPU in the tests, and keeps compiled kernels in /tmp/kestrel-cache.
export KESTREL_REQUIRE_GPU=1 KESTREL_CACHE_DIR=${KESTREL_CACHE_DIR:-/tmp/kestrel-cache}
if ! ldconfig -p | grep -q 'libnvrtc.so '; then
  lib=$(ls /usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so* 2>/dev/null | head -1)
  [ -z "$lib" ] && lib=$(python3 -c 'import nvidia.cuda_nvrtc,os,glob;print(glob.glob(os.path.join(list(nvidia.cuda_nvrtc.__path__)[0],"lib","libnvrtc.so*"))[0])' 2>/dev/null)
  if [ -n "$lib" ]; then mkdir -p /tmp/nvlib; ln -sf "$lib" /tmp/nvlib/libnvrtc.so; export LD_LIBRARY_PATH=/tmp/nvlib:$(dirname "$lib"):${LD_LIBRARY_PATH:-}; fi
fi
