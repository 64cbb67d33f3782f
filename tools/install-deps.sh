#!/bin/sh
# Installs what fabula needs to build, test and validate on Debian 12 (as
# root). MPICH is the reference MPI; parallel HDF5 is built against it.
# python3-torch and python3-h5py serve the PyTorch reference (validation/).
# The Hugging Face `tokenizers` package (tests/e2e/tokenizer_hf.sh and
# bench/tokenizer_encode.sh compare fabula with it) is not packaged by Debian:
# it comes from PyPI into Debian's own python3, so the tests find it next to
# torch. Debian marks that interpreter externally managed, hence
# --break-system-packages; --no-deps keeps pip from replacing Debian's
# modules (tokenizers needs huggingface_hub only for downloads, never used).
# TensorBoard (tests/e2e/tensorboard.sh reads fabula's event files with its
# EventAccumulator) comes the same way; what that imports besides numpy is
# protobuf and absl, taken from Debian (python3-protobuf 3.21,
# python3-absl). 2.17.1 is pinned: the newest releases ship protobuf
# modules that need protobuf 5's runtime, which Debian 12 lacks. The server
# (`tensorboard --logdir`, docs/monitoring.md) needs werkzeug, grpcio,
# markdown, packaging, six and setuptools as well: Debian's, all of them
# (without tensorboard-data-server, TensorBoard reads the files in Python).
# transformers (tests/e2e/hf_*.sh load fabula's exports with it and make the
# tiny models init_from starts from) lives in its own virtual environment,
# /opt/fabula-hf, that sees Debian's torch 1.13 through
# --system-site-packages: transformers 4.46.3 is the newest release that
# still runs on torch 1.13, and it pins tokenizers < 0.21, which must not
# replace the tokenizers 0.22.2 the tokenizer tests compare with. Its
# generate() imports torch.distributed.fsdp, which torch 1.13 cannot import
# under Python 3.11: tools/hf-env/fabula_hf_compat.py, installed into the
# environment with a .pth file, answers "not FSDP-managed" there.
# slurm-wlm and munge: tests/e2e/slurm_real.sh starts a one-node Slurm from
# a scratch folder; it starts and stops its own daemons.
set -e
PKGS="build-essential autoconf automake libtool pkg-config
      mpich libmpich-dev libhdf5-mpich-dev hdf5-tools
      libjansson-dev libopenblas-dev libpcre2-dev libutf8proc-dev libpapi-dev
      python3 python3-numpy python3-h5py python3-torch python3-pip
      python3-protobuf python3-absl
      python3-werkzeug python3-grpcio python3-markdown python3-packaging python3-six python3-setuptools
      slurm-wlm munge"
TOKENIZERS_VERSION=0.22.2
TENSORBOARD_VERSION=2.17.1
HF_VENV=/opt/fabula-hf
HF_PKGS="transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.36.2 safetensors==0.8.0"
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (or install these packages): $PKGS" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
/usr/bin/python3 -m pip install -q --break-system-packages --no-deps "tokenizers==$TOKENIZERS_VERSION" \
    "tensorboard==$TENSORBOARD_VERSION"
[ -x "$HF_VENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$HF_VENV"
# shellcheck disable=SC2086
"$HF_VENV/bin/python" -m pip install -q $HF_PKGS
HF_SITE=$("$HF_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp "$(dirname "$0")/hf-env/fabula_hf_compat.py" "$HF_SITE/"
echo "import fabula_hf_compat" >"$HF_SITE/fabula_hf_compat.pth"
echo "install-deps.sh: installed: $(echo $PKGS), tokenizers $TOKENIZERS_VERSION," \
    "tensorboard $TENSORBOARD_VERSION (pip), $HF_PKGS (in $HF_VENV, with fabula_hf_compat)"
