#!/usr/bin/env bash
# `ibscope host --counters` on a generated sysfs tree of 12 RDMA devices (one port each,
# the PortCounters and the mlx5 hw_counters a ConnectX-7 shows: about 60 files a port),
# RUNS times (default 20): the median wall time of one read of every counter. Target:
# at most 20 ms. No reference tool reads these files (node_exporter's InfiniBand collector
# reads counters/ only, not hw_counters/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/lib.sh"
runs=${RUNS:-20}
bench_setup host-counters
tree="$work/tree"
port_counters="symbol_error link_error_recovery link_downed port_rcv_errors
port_rcv_remote_physical_errors port_rcv_switch_relay_errors port_xmit_discards
port_xmit_constraint_errors port_rcv_constraint_errors local_link_integrity_errors
excessive_buffer_overrun_errors VL15_dropped port_xmit_data port_rcv_data port_xmit_packets
port_rcv_packets unicast_xmit_packets unicast_rcv_packets multicast_xmit_packets
multicast_rcv_packets port_xmit_wait"
hw_counters="duplicate_request implied_nak_seq_err local_ack_timeout_err lifespan
np_cnp_sent np_ecn_marked_roce_packets out_of_buffer out_of_sequence packet_seq_err
req_cqe_error req_cqe_flush_error req_remote_access_errors req_remote_invalid_request
resp_cqe_error resp_cqe_flush_error resp_local_length_error resp_remote_access_errors
rnr_nak_retry_err roce_adp_retrans roce_adp_retrans_to roce_slow_restart
roce_slow_restart_cnps roce_slow_restart_trans rp_cnp_handled rp_cnp_ignored
rx_atomic_requests rx_icrc_encapsulated rx_read_requests rx_write_requests"
files=0
for d in $(seq 0 11); do
    port="$tree/sys/class/infiniband/mlx5_$d/ports/1"
    mkdir -p "$port/counters" "$port/hw_counters"
    for c in $port_counters; do echo $((RANDOM * d)) >"$port/counters/$c"; files=$((files + 1)); done
    for c in $hw_counters; do echo $((RANDOM * d)) >"$port/hw_counters/$c"; files=$((files + 1)); done
done
for ((r = 0; r < runs; r++)); do
    IBSCOPE_SYSFS_ROOT="$tree" timed counters "$ibscope" host --counters
done
median_s=$(median <"$work/walls.counters")
echo "12 devices, $files counter files: host --counters median $(awk -v s="$median_s" 'BEGIN { printf "%.1f", s * 1000 }') ms over $runs runs (target 20 ms)"
