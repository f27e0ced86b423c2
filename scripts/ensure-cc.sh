#!/usr/bin/env bash
# pip install -e . compiles the AMQP value codec in C (local_broker/wire/amqp/_speedups.c) when a C compiler
# and the interpreter's headers are there, and installs pure Python without them; install Debian's gcc, and
# python3-dev for a Debian python3 without its headers, so `make` gets the C codec. Usage: ensure-cc.sh PYTHON
set -euo pipefail
python="${1:-python3}"
packages=()
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || packages+=(gcc libc6-dev)
headers=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -f "$headers/Python.h" ] || packages+=(python3-dev)
[ ${#packages[@]} -eq 0 ] && exit 0
echo "a C compiler or Python.h is missing (the AMQP codec in C); installing Debian's ${packages[*]}" >&2
bash "$(dirname "$0")/apt-install.sh" --no-install-recommends "${packages[@]}"
