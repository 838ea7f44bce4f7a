#!/usr/bin/env bash
# Writes the sysfs/procfs fixture trees that tests/host.rs reads through IBSCOPE_SYSFS_ROOT.
# Each tree mirrors a real kernel's layout: /sys/class/infiniband/<dev> and
# /sys/bus/pci/devices/<addr> are relative symlinks into /sys/devices/pci<domain:bus>/...,
# an RDMA device sits in its PCI function's infiniband/ directory with a `device` link back,
# a PCI function's `driver` links to /sys/bus/pci/drivers/<name>, whose `module` links to
# /sys/module/<name>. File contents are what the kernel writes (drivers/infiniband/core/
# sysfs.c, drivers/pci/pci-sysfs.c), newline included.
#
# Trees:
#   connectx6-ib    one ConnectX-6 HCA, InfiniBand 4xHDR, in-tree driver, no GPU
#   roce-cx6dx      a dual-port ConnectX-6 Dx (two PCI functions, two devices) on Ethernet:
#                   port of mlx5_0 Active with link-local, IPv4 and IPv6 GIDs in RoCE v1 and
#                   v2; mlx5_1 without a link
#   pcie-degraded   one ConnectX-7 (PCIe Gen5 x16) trained at Gen4 x8 in a Gen5 x16 slot
#   dgx-h100        8 ConnectX-7 at 4xNDR and 8 H100 GPUs, each pair behind one PCIe switch,
#                   4 NVSwitches, MLNX_OFED driver, nvidia_peermem loaded; mlx5_5 at 4xHDR
#
# Run from anywhere; it replaces the trees beside itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# w FILE LINE: a sysfs attribute (one line and a newline).
w() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }
# l LINK TARGET: a relative symlink, as sysfs has them.
l() { mkdir -p "$(dirname "$1")" "$(dirname "$2")"; ln -sr "$2" "$1"; }

# host ROOT HOSTNAME KERNEL MODULE...: procfs facts and the loaded modules.
host() {
    local root=$1 name=$2 kernel=$3; shift 3
    w "$root/proc/sys/kernel/hostname" "$name"
    w "$root/proc/sys/kernel/osrelease" "$kernel"
    mkdir -p "$root/proc"
    : >"$root/proc/modules"
    local m addr=$((0xffffffffc0a00000))
    for m in "$@"; do
        printf '%s 16384 0 - Live 0x%x\n' "$m" "$addr" >>"$root/proc/modules"
        addr=$((addr + 0x20000))
        w "$root/sys/module/$m/initstate" live
    done
}

# driver ROOT NAME [VERSION]: a PCI driver and its module (VERSION: out-of-tree).
driver() {
    local root=$1 name=$2
    mkdir -p "$root/sys/bus/pci/drivers/$name" "$root/sys/module/$name"
    [ -e "$root/sys/bus/pci/drivers/$name/module" ] ||
        l "$root/sys/bus/pci/drivers/$name/module" "$root/sys/module/$name"
    if [ $# -ge 3 ]; then w "$root/sys/module/$name/version" "$3"; fi
}

# link DIR CUR_GTS CUR_WIDTH MAX_GTS MAX_WIDTH: PCIe link attributes.
link() {
    w "$1/current_link_speed" "$2 GT/s PCIe"
    w "$1/current_link_width" "$3"
    w "$1/max_link_speed" "$4 GT/s PCIe"
    w "$1/max_link_width" "$5"
}

# pcidev ROOT PATH VENDOR DEVICE CLASS NUMA [DRIVER]: a PCI function at
# /sys/devices/PATH, listed in /sys/bus/pci/devices.
pcidev() {
    local root=$1 dir="$1/sys/devices/$2" addr
    addr=$(basename "$2")
    w "$dir/vendor" "$3"
    w "$dir/device" "$4"
    w "$dir/class" "$5"
    w "$dir/numa_node" "$6"
    l "$root/sys/bus/pci/devices/$addr" "$dir"
    if [ $# -ge 7 ]; then l "$dir/driver" "$root/sys/bus/pci/drivers/$7"; fi
}

# bridge ROOT PATH NUMA GTS WIDTH [CUR_GTS CUR_WIDTH]: a root port or switch port.
bridge() {
    pcidev "$1" "$2" 0x8086 0x352a 0x060400 "$3" pcieport
    link "$1/sys/devices/$2" "${6:-$4}" "${7:-$5}" "$4" "$5"
}

# acs ROOT PATH CONTROL: a switch port's configuration space as root reads it (4 KiB),
# its extended capability list holding AER (0x0001) at 0x100, then ACS (0x000D) at 0x148
# with capability register 0x005f and control register CONTROL (4 hex digits).
acs() {
    local c=$3
    {
        head -c 256 /dev/zero
        printf '\x01\x00\x82\x14'             # AER, version 2, next 0x148
        head -c 68 /dev/zero
        printf '\x0d\x00\x01\x00\x5f\x00'   # ACS, version 1, last; capability 0x005f
        printf "\\x${c:2:2}\\x${c:0:2}"
        head -c $((4096 - 0x148 - 8)) /dev/zero
    } >"$1/sys/devices/$2/config"
}

# hca ROOT NAME PCI_PATH TYPE FW GUID: an RDMA device of a PCI function.
hca() {
    local root=$1 name=$2 pci="$1/sys/devices/$3" dir
    dir="$pci/infiniband/$name"
    w "$dir/node_type" "1: CA"
    w "$dir/node_guid" "$6"
    w "$dir/sys_image_guid" "$6"
    w "$dir/fw_ver" "$5"
    w "$dir/hca_type" "$4"
    w "$dir/hw_rev" "0x0"
    w "$dir/board_id" "MT_0000000838"
    w "$dir/node_desc" "$(cat "$root/proc/sys/kernel/hostname") $name"
    l "$dir/device" "$pci"
    l "$root/sys/class/infiniband/$name" "$dir"
    # ib_uverbs' character device (numbered in probe order: the device's own index here),
    # and its node in /dev (a plain file stands in for the character device).
    local verbs="$pci/infiniband_verbs/uverbs${name##*_}"
    w "$verbs/ibdev" "$name"
    w "$verbs/abi_version" 1
    l "$root/sys/class/infiniband_verbs/uverbs${name##*_}" "$verbs"
    mkdir -p "$root/dev/infiniband"
    : >"$root/dev/infiniband/uverbs${name##*_}"
}

# umad ROOT NAME PORT: ib_umad's character device of an InfiniBand port (the next number).
umad() {
    local root=$1 n pci
    mkdir -p "$root/sys/class/infiniband_mad"
    n=$(find "$root/sys/class/infiniband_mad" -maxdepth 1 -name 'umad*' | wc -l)
    pci=$(readlink -f "$root/sys/class/infiniband/$2/device")
    w "$pci/infiniband_mad/umad$n/ibdev" "$2"
    w "$pci/infiniband_mad/umad$n/port" "$3"
    l "$root/sys/class/infiniband_mad/umad$n" "$pci/infiniband_mad/umad$n"
    mkdir -p "$root/dev/infiniband"
    : >"$root/dev/infiniband/umad$n"
}

# ibport ROOT NAME PORT STATE PHYS RATE LID SMLID GID0: an InfiniBand port; GID 0 is the
# port GID, entries 1-3 are empty (the kernel shows zeros and refuses their attributes).
ibport() {
    local dir
    dir=$(readlink -f "$1/sys/class/infiniband/$2")/ports/$3
    w "$dir/state" "$4"
    w "$dir/phys_state" "$5"
    w "$dir/rate" "$6"
    w "$dir/link_layer" InfiniBand
    w "$dir/lid" "$7"
    w "$dir/sm_lid" "$8"
    w "$dir/sm_sl" 0
    w "$dir/lid_mask_count" 0
    w "$dir/cap_mask" 0xa751e848
    w "$dir/gids/0" "$9"
    w "$dir/gid_attrs/types/0" "IB/RoCE v1"
    local i
    for i in 1 2 3; do w "$dir/gids/$i" 0000:0000:0000:0000:0000:0000:0000:0000; done
    mkdir -p "$dir/gid_attrs/ndevs"
    umad "$1" "$2" "$3"
}

# ethport ROOT NAME PORT STATE PHYS RATE NETDEV GID...: a RoCE port; each GID is entered
# twice, RoCE v1 then RoCE v2, as the kernel fills the table.
ethport() {
    local root=$1 name=$2 port=$3 state=$4 phys=$5 rate=$6 netdev=$7 dir i=0 g
    shift 7
    dir=$(readlink -f "$root/sys/class/infiniband/$name")/ports/$port
    w "$dir/state" "$state"
    w "$dir/phys_state" "$phys"
    w "$dir/rate" "$rate"
    w "$dir/link_layer" Ethernet
    w "$dir/lid" 0x0
    w "$dir/sm_lid" 0x0
    w "$dir/sm_sl" 0
    w "$dir/lid_mask_count" 0
    w "$dir/cap_mask" 0x04010000
    for g in "$@"; do
        for t in "IB/RoCE v1" "RoCE v2"; do
            w "$dir/gids/$i" "$g"
            w "$dir/gid_attrs/types/$i" "$t"
            w "$dir/gid_attrs/ndevs/$i" "$netdev"
            i=$((i + 1))
        done
    done
    w "$dir/gids/$i" 0000:0000:0000:0000:0000:0000:0000:0000
}

connectx6_ib() {
    local r=$here/connectx6-ib
    host "$r" node017 6.1.0-18-amd64 mlx5_ib ib_uverbs ib_umad mlx5_core ib_core
    driver "$r" mlx5_core
    driver "$r" pcieport
    bridge "$r" pci0000:c0/0000:c0:01.1 0 16.0 16
    pcidev "$r" pci0000:c0/0000:c0:01.1/0000:c1:00.0 0x15b3 0x101b 0x020700 0 mlx5_core
    link "$r/sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0" 16.0 16 16.0 16
    hca "$r" mlx5_0 pci0000:c0/0000:c0:01.1/0000:c1:00.0 MT4123 20.31.1014 0c42:a103:00a5:8f2e
    ibport "$r" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "200 Gb/sec (4X HDR)" 0x11 0x1 \
        fe80:0000:0000:0000:0c42:a103:00a5:8f2e
}

roce_cx6dx() {
    local r=$here/roce-cx6dx rp=pci0000:40/0000:40:01.1
    host "$r" web-roce-03 6.8.0-45-generic mlx5_ib ib_uverbs mlx5_core ib_core
    driver "$r" mlx5_core
    driver "$r" pcieport
    bridge "$r" $rp 0 16.0 16
    local f guids=(0c42:a103:008a:1c2e 0c42:a103:008a:1c2f)
    for f in 0 1; do
        pcidev "$r" $rp/0000:41:00.$f 0x15b3 0x101d 0x020000 0 mlx5_core
        link "$r/sys/devices/$rp/0000:41:00.$f" 16.0 16 16.0 16
        hca "$r" mlx5_$f $rp/0000:41:00.$f MT4125 22.36.1010 "${guids[$f]}"
    done
    # The link-local GID comes from the MAC (EUI-64), the others from the addresses.
    ethport "$r" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "100 Gb/sec (4X EDR)" enp65s0f0np0 \
        fe80:0000:0000:0000:0e42:a1ff:fe8a:1c2e \
        0000:0000:0000:0000:0000:ffff:c0a8:0a15 \
        2001:0db8:0010:0000:0000:0000:0000:0021
    # `ethtool -S enp65s0f0np0` (mlx5 names; priority 3 is the lossless class), saved
    # where the reader looks under a fixture root.
    mkdir -p "$r/ethtool"
    cat >"$r/ethtool/enp65s0f0np0" <<'STATS'
NIC statistics:
     rx_packets: 1284412
     tx_packets: 1190337
     rx_discards_phy: 0
     tx_discards_phy: 0
     rx_out_of_buffer: 3
     rx_prio3_pause: 1520
     rx_prio3_pause_duration: 88120
     tx_prio3_pause: 311
     tx_prio3_pause_duration: 20450
     rx_pause_ctrl_phy: 0
     tx_pause_ctrl_phy: 0
     tx_pause_storm_warning_events: 0
     tx_pause_storm_error_events: 0
STATS
    # Lossless priority 3 for DSCP 26: `dcb pfc show` and `dcb app show dscp-prio` output,
    # as iproute2's dcb prints it (DSCPs by name: AF31 is 26, CS6 48; see
    # ../netdev/README.md), saved where the reader looks under a fixture root; ECN on
    # priority 3, rdma_cm's default ToS 106 (DSCP 26, ECT), a 9000-byte MTU.
    mkdir -p "$r/dcb"
    cp "$here/../netdev/iproute2-dcb/pfc3-dscp26.txt" "$r/dcb/enp65s0f0np0"
    local net=$r/sys/class/net/enp65s0f0np0 p
    w "$net/mtu" 9000
    for p in 0 1 2 3 4 5 6 7; do
        w "$net/ecn/roce_np/enable/$p" $((p == 3 ? 1 : 0))
        w "$net/ecn/roce_rp/enable/$p" $((p == 3 ? 1 : 0))
    done
    w "$r/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos" 106
    # No cable: the kernel still reports a default rate, which means nothing.
    ethport "$r" mlx5_1 1 "1: DOWN" "3: Disabled" "40 Gb/sec (4X QDR)" enp65s0f1np1 \
        fe80:0000:0000:0000:0e42:a1ff:fe8a:1c2f
}

pcie_degraded() {
    local r=$here/pcie-degraded rp=pci0000:c0/0000:c0:01.1
    host "$r" gpu-node-12 5.15.0-105-generic mlx5_ib ib_uverbs ib_umad mlx5_core ib_core
    driver "$r" mlx5_core
    driver "$r" pcieport
    # The slot is Gen5 x16; the link trained at Gen4 x8 (both ends report the link).
    bridge "$r" $rp 1 32.0 16 16.0 8
    pcidev "$r" $rp/0000:c1:00.0 0x15b3 0x1021 0x020700 1 mlx5_core
    link "$r/sys/devices/$rp/0000:c1:00.0" 16.0 8 32.0 16
    hca "$r" mlx5_0 $rp/0000:c1:00.0 MT4129 28.39.1002 a088:c203:0031:7a40
    ibport "$r" mlx5_0 1 "4: ACTIVE" "5: LinkUp" "400 Gb/sec (4X NDR)" 0x2c 0x1 \
        fe80:0000:0000:0000:a088:c203:0031:7a40
}

dgx_h100() {
    local r=$here/dgx-h100
    host "$r" dgx-h100-07 5.15.0-1042-nvidia nvidia_peermem nvidia_uvm nvidia_drm nvidia_modeset \
        nvidia mlx5_ib ib_uverbs ib_umad rdma_ucm rdma_cm ib_ipoib mlx5_core ib_core
    driver "$r" mlx5_core 24.10-1.1.4
    driver "$r" nvidia 550.54.15
    driver "$r" pcieport
    w "$r/sys/module/nvidia_peermem/version" 550.54.15
    # rdma-core 50.0's libibverbs (the name is what is read) and the NVIDIA driver's
    # procfs version line.
    mkdir -p "$r/usr/lib/x86_64-linux-gnu"
    : >"$r/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0"
    w "$r/proc/driver/nvidia/version" \
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
    # Each GPU and its HCA hang off one PCIe switch (upstream port, two downstream ports)
    # below a root port: the bus numbers of a DGX H100.
    local bases=(15 3d 4c 5b 97 bd cb d9) i b nic gpu numa rp up rate
    for i in "${!bases[@]}"; do
        b=${bases[$i]}
        numa=$((i / 4))
        rp=pci0000:$b/0000:$b:01.0
        up=$rp/0000:$(printf %02x $((0x$b + 1))):00.0
        nic=$(printf %02x $((0x$b + 3)))
        gpu=$(printf %02x $((0x$b + 6)))
        bridge "$r" $rp $numa 32.0 16
        bridge "$r" "$up" $numa 32.0 16
        bridge "$r" "$up/0000:$(printf %02x $((0x$b + 2))):00.0" $numa 32.0 16
        bridge "$r" "$up/0000:$(printf %02x $((0x$b + 2))):02.0" $numa 32.0 16
        # ACS off on the switch's downstream ports, as GPUDirect RDMA needs it.
        acs "$r" "$up/0000:$(printf %02x $((0x$b + 2))):00.0" 0000
        acs "$r" "$up/0000:$(printf %02x $((0x$b + 2))):02.0" 0000
        local nicdir="$up/0000:$(printf %02x $((0x$b + 2))):00.0/0000:$nic:00.0"
        local gpudir="$up/0000:$(printf %02x $((0x$b + 2))):02.0/0000:$gpu:00.0"
        pcidev "$r" "$nicdir" 0x15b3 0x1021 0x020700 $numa mlx5_core
        link "$r/sys/devices/$nicdir" 32.0 16 32.0 16
        pcidev "$r" "$gpudir" 0x10de 0x2330 0x030200 $numa nvidia
        link "$r/sys/devices/$gpudir" 32.0 16 32.0 16
        hca "$r" mlx5_$i "$nicdir" MT4129 28.39.1002 "a088:c203:00b5:1c$(printf %02x $((i * 8)))"
        rate="400 Gb/sec (4X NDR)"
        [ "$i" -eq 5 ] && rate="200 Gb/sec (4X HDR)"
        ibport "$r" mlx5_$i 1 "4: ACTIVE" "5: LinkUp" "$rate" "0x$(printf %x $((0x65 + i)))" 0x1 \
            "fe80:0000:0000:0000:a088:c203:00b5:1c$(printf %02x $((i * 8)))"
    done
    # NVSwitches are NVIDIA PCI functions too, of a bridge class: not GPUs.
    for i in 0 1 2 3; do
        rp=pci0000:00/0000:00:0$((i + 1)).0
        bridge "$r" $rp 0 16.0 2
        pcidev "$r" $rp/0000:0$((i + 5)):00.0 0x10de 0x22a3 0x068000 0 nvidia
        link "$r/sys/devices/$rp/0000:0$((i + 5)):00.0" 16.0 2 16.0 2
    done
}

for t in connectx6-ib roce-cx6dx pcie-degraded dgx-h100; do rm -rf "${here:?}/$t"; done
connectx6_ib
roce_cx6dx
pcie_degraded
dgx_h100
