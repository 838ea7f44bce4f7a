#!/usr/bin/env bash
# Installs what ibscope's demo and tests need on Debian: the simulated fabric (ibsim + its
# libibumad shim), the real subnet manager (OpenSM), the reference tools (infiniband-diags),
# libibumad's headers for linking, libibverbs/librdmacm headers and libclang for the `verbs`
# feature (rdma-sys generates its bindings with bindgen at build time), tmux for the TUI test,
# Graphviz to validate DOT output, Prometheus (promtool and the server) for the exporter,
# dashboard and alert tests, groff to check the man pages, dpkg-dev for the Debian
# package's library dependencies (dpkg-shlibdeps), and curl and openssl for the exporter's
# TLS and basic-auth test (a real client; a test certificate made at test time). Skips apt
# when everything is already there.
set -euo pipefail
pkgs=(ibsim-utils libumad2sim0 opensm infiniband-diags libibumad-dev libibmad-dev pkg-config
      libibverbs-dev librdmacm-dev libclang-dev tmux prometheus graphviz groff-base dpkg-dev
      curl openssl)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
