#!/bin/sh
# Installs what fabula needs to build, test and validate on Debian 12 (as
# root). MPICH is the reference MPI; parallel HDF5 is built against it.
# python3-torch and python3-h5py serve the PyTorch reference (validation/).
set -e
PKGS="build-essential autoconf automake libtool pkg-config
      mpich libmpich-dev libhdf5-mpich-dev hdf5-tools
      libjansson-dev libopenblas-dev libpcre2-dev libpapi-dev
      python3 python3-numpy python3-h5py python3-torch"
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root (or install these packages): $PKGS" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
echo "install-deps.sh: installed: $(echo $PKGS)"
